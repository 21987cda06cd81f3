"""Writing an adapter's edits, and the restores an eviction still owes.

Restoring the templates (the admission's placement taken out) is an eviction's last step,
after the quota went back: the next reconcile finds the object pending, not evicting, and
would never restore it again. Two things can cut the step short: its PUT meets a 409 (the Job
controller writes the Job's status as the pods it deleted go, so the cached Job is often one
version behind), and a Job whose cached start time is still set gets only the start time
cleared (its template may change once that is done). So the restore is owed from the release
until it is applied in full, and a pending reconcile pays what is owed.
"""

from __future__ import annotations

from collections.abc import Sequence

from rayquota.operator.core import ObjectKey
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.kube import KubeClient
from rayquota.operator.queue.adapters import Edit
from rayquota.operator.queue.adapters.protocol import KindAdapter
from rayquota.operator.queue.objects import RESOURCE_OF_KIND


async def apply_edits(client: KubeClient, edits: Sequence[Edit]) -> None:
    for edit in edits:
        meta = edit.body["metadata"]
        resource = RESOURCE_OF_KIND[edit.kind]
        if edit.status_patch:
            path = resource.path(str(meta["namespace"]), str(meta["name"]), "status")
            await client.merge_patch(path, {"status": edit.body["status"]})
            continue
        await client.replace(resource.path(str(meta["namespace"]), str(meta["name"])), edit.body)


class OwedRestores:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._owed: set[ObjectKey] = set()

    def __contains__(self, key: object) -> bool:
        return key in self._owed

    def owe(self, key: ObjectKey) -> None:
        self._owed.add(key)

    def forget(self, key: ObjectKey) -> None:
        self._owed.discard(key)

    async def pay(self, key: ObjectKey, adapter: KindAdapter, obj: Obj, children: Sequence[Obj]) -> None:
        """Apply the restore; still owed if it raised, or if it only cleared a Job's start time
        (the object's watch brings the next step)."""
        edits = adapter.restore(obj, children)
        await apply_edits(self.client, edits)
        if not any(edit.status_patch for edit in edits):
            self._owed.discard(key)
