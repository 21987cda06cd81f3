"""Putting a finalizer on an object and taking it off, as every controller here does it: one
conditional merge patch (the cached resourceVersion: a stale cache gets a Conflict).

Taking a finalizer off an object that is already gone is done, not an error: the object was
being deleted, so once the last finalizer went it went too. That is what a retried removal
finds when its first attempt was stored but its answer lost (an API server or etcd failing in
between), and what a second reconcile finds after a removal the cache has not shown yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.kube import KubeClient, NotFound


async def set_finalizer(
    client: KubeClient, path: str, obj: Mapping[str, Any], finalizer: str, *, present: bool
) -> None:
    """Add (`present`) or remove `finalizer` on the object at `path` as the cached `obj` shows it."""
    meta = obj["metadata"]
    others = [f for f in meta.get("finalizers") or [] if f != finalizer]
    wanted = [*others, finalizer] if present else others
    patch = {"metadata": {"finalizers": wanted, "resourceVersion": meta["resourceVersion"]}}
    try:
        await client.merge_patch(path, patch)
    except NotFound:
        if present:
            raise
