"""Exact status writes: the computed status replaces the stored one.

A merge patch cannot remove nested keys, so a status that lost a key would look changed for
ever. Here the whole status is PUT on the status subresource with the cached resourceVersion
(optimistic concurrency: a 409 means the watch has a newer object on its way), and only when
it differs from what is stored. Keys whose value is None are dropped before comparing, so
"absent" and "null" are the same thing.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.operator.core.cache.store import Obj
from rayquota.operator.core.resources import Resource
from rayquota.operator.kube import KubeClient, NotFound

_REMEMBERED = 100_000
# How long to wait for the watch to deliver our own write before trusting the cache anyway
# (a relist after 410 Gone may skip the exact version we wrote).
_OWN_WRITE_WAIT_S = 10.0


def without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def _not_older(cached: str, written: str) -> bool:
    """Does the cache show our write, or a later version? The watch may have delivered our own
    write before its response came back (so ``observe`` could not recognise it), and then a newer
    one: waiting for an event that already came would stall the reconcile. resourceVersions are
    opaque, but the API server's are etcd revisions, which only grow; anything else compares
    equal or not at all."""
    if cached == written:
        return True
    return cached.isdigit() and written.isdigit() and int(cached) > int(written)


def _canonical(status: Any) -> bytes:
    """A digest of the status's canonical JSON: what was sent is compared, never read back, so
    16 bytes stand for the text (a Workload's status is about a kilobyte, and one is kept for
    every object written: 50,000 at Kueue's large scale)."""
    text = json.dumps(status, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _apply_body(resource: Resource, meta: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    """An apply configuration of the status alone; the resourceVersion keeps the PUT's
    optimistic concurrency (a stale cache still gets a 409)."""
    identity = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if meta.get(k)}
    return {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": identity, "status": status}


@dataclass(slots=True)
class _Written:
    """What this process last wrote to one object's status."""

    canonical: bytes  # the status we sent: a digest of its canonical JSON
    version: str  # the resourceVersion the server answered
    at: float  # when (monotonic clock)
    # Until when a reconcile must wait for the cache to show `version`; None once it has.
    wait_until: float | None


class StatusWriter:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.writes = 0
        # uid -> our last write, least recently written first. When the server normalises what
        # we sent (schema pruning, defaulting), the next identical computation must not write
        # again; a reconcile acting on a cache older than our write must wait for the watch.
        self._written: OrderedDict[str, _Written] = OrderedDict()
        # resource -> field manager: statuses written by server-side apply instead of PUT, for
        # resources whose status other tools co-own by apply (Kueue's Workloads).
        self.apply_as: dict[Resource, str] = {}
        # uid -> the versions the cache showed while a write of that object was awaited: the
        # watch may deliver our own write before the write's answer is read, and a version seen
        # then must count as seen (else the next reconcile waits out _OWN_WRITE_WAIT_S).
        self._in_flight: dict[str, set[str]] = {}

    def deferral(self, obj: Mapping[str, Any], status: Mapping[str, Any], min_interval_s: float) -> float:
        """Seconds to hold back a write of `status` so that one object's status is written at most
        every `min_interval_s` while it is in motion; 0 when it may be written now (or is unchanged).
        Callers write transitions that matter (a new `state`) at once and coalesce the rest."""
        if without_nulls(status) == without_nulls(obj.get("status") or {}):
            return 0.0
        written = self._written.get(str(obj["metadata"].get("uid")))
        if written is None:
            return 0.0
        return max(0.0, written.at + min_interval_s - time.monotonic())

    def observe(self, kind: str, obj: Mapping[str, Any], _old: Mapping[str, Any] | None) -> None:
        """Informer hook: the cache now holds this version (or the object is gone)."""
        meta = obj["metadata"]
        if kind == "DELETED":
            self._written.pop(str(meta.get("uid")), None)
            return
        seen = self._in_flight.get(str(meta.get("uid")))
        if seen is not None:
            seen.add(str(meta.get("resourceVersion")))
        written = self._written.get(str(meta.get("uid")))
        if written is not None and written.version == str(meta.get("resourceVersion")):
            written.wait_until = None

    def is_stale(self, obj: Mapping[str, Any]) -> bool:
        """True while the cached `obj` predates a status we wrote: a reconcile must not act on it."""
        meta = obj["metadata"]
        written = self._written.get(str(meta.get("uid")))
        if written is None or written.wait_until is None:
            return False
        cached = str(meta.get("resourceVersion"))
        if _not_older(cached, written.version) or time.monotonic() > written.wait_until:
            written.wait_until = None
            return False
        return True

    async def write(
        self, resource: Resource, obj: Mapping[str, Any], status: Mapping[str, Any]
    ) -> Obj | None:
        """Write `status` if it differs; returns the stored object (the cached one when nothing was
        written), or None when the object is gone. Raises Conflict when the cache is stale."""
        wanted = without_nulls(status)
        if wanted == without_nulls(obj.get("status") or {}):
            return dict(obj)
        meta = obj["metadata"]
        uid, version = str(meta.get("uid")), str(meta.get("resourceVersion"))
        canonical = _canonical(wanted)
        previous = self._written.get(uid)
        if previous is not None and (previous.canonical, previous.version) == (canonical, version):
            return dict(obj)
        path = resource.path(meta.get("namespace"), meta["name"], "status")
        seen = self._in_flight.setdefault(uid, set())
        try:
            if resource in self.apply_as:
                stored = await self.client.apply(
                    path, _apply_body(resource, meta, wanted), self.apply_as[resource]
                )
            else:
                stored = await self.client.replace(path, {**obj, "status": wanted})
        except NotFound:
            return None
        finally:
            self._in_flight.pop(uid, None)
        self.writes += 1
        now = time.monotonic()
        stored_version = str(stored["metadata"].get("resourceVersion"))
        # Already in the cache (the watch was quicker than the answer): nothing to wait for.
        wait_until = None if stored_version in seen else now + _OWN_WRITE_WAIT_S
        self._written[uid] = _Written(canonical, stored_version, now, wait_until)
        self._written.move_to_end(uid)
        while len(self._written) > _REMEMBERED:
            self._written.popitem(last=False)
        return stored

    def forget(self, uid: str) -> None:
        self._written.pop(uid, None)
