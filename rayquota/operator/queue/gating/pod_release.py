"""Letting held pods through, for both ungaters (a Ray cluster's pods, a Job's pods): one guarded
JSON patch per pod the decision (`pod_gate.Holding`) releases, and one event per change of the
words that say why the others wait.

The pods this process let through are remembered until the cache shows them without the gate:
they count as let through, so a reconcile ahead of the cache never lets a second pod take a place.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.operator.core import Manager, ObjectKey, Result, resources
from rayquota.operator.kube import ApiError, NotFound
from rayquota.operator.queue.gating import pod_gate

log = logging.getLogger(__name__)

PODS_HELD = "PodsHeldByQuota"
PODS_BEYOND = "PodsBeyondQuota"
BEYOND_CAUSE = (
    "they were created without rayquota's scheduling gate (are the pod webhooks off?), so "
    "nothing holds them until the admission covers them"
)
RETRY_AFTER_FAILED_PATCH_S = 1.0


class PodReleases:
    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        # owner -> the words last posted, so an owner that keeps waiting says it once.
        self._said: dict[ObjectKey, tuple[str, ...]] = {}
        self._beyond: dict[ObjectKey, tuple[str, ...]] = {}
        self._released: set[str] = set()

    def as_released(self, pod: Mapping[str, Any]) -> Mapping[str, Any]:
        """The pod as this process left it: without the gate once it let it through."""
        uid = str(pod["metadata"].get("uid"))
        if uid not in self._released:
            return pod
        if not pod_gate.gated(pod):
            self._released.discard(uid)  # the cache caught up
            return pod
        return pod_gate.without_gate(pod)

    def nothing_held(self, key: ObjectKey) -> None:
        self._said.pop(key, None)

    def forget(self, key: ObjectKey) -> None:
        """The cluster is gone: nothing said about it is kept."""
        self._said.pop(key, None)
        self._beyond.pop(key, None)

    def flag_beyond(self, key: ObjectKey, owner: Mapping[str, Any], words: tuple[str, ...]) -> None:
        """Say (once per change, as a Warning on ``owner``) which pods run beyond the quota."""
        if not words:
            self._beyond.pop(key, None)
            return
        if self._beyond.get(key) != words:
            self._beyond[key] = words
            self.manager.recorder.post(owner, "Warning", PODS_BEYOND, "; ".join(words) + ": " + BEYOND_CAUSE)

    async def apply(
        self, key: ObjectKey, owner: Mapping[str, Any], holding: pod_gate.Holding
    ) -> Result | None:
        """Patch each released pod; say (once) why the rest wait, as an event on ``owner``."""
        for release in holding.releases:
            meta = release.pod["metadata"]
            path = resources.PODS.path(str(meta["namespace"]), str(meta["name"]))
            try:
                await self.manager.client.json_patch(path, release.patch())
            except NotFound:
                continue
            except ApiError as exc:
                # Changed meanwhile (the gate test failed) or refused: look again from the cache.
                log.info("pod %s/%s not let through yet: %s", meta["namespace"], meta["name"], exc)
                return Result(requeue_after_s=RETRY_AFTER_FAILED_PATCH_S)
            self._released.add(str(meta.get("uid")))
        if holding.waiting and self._said.get(key) != holding.waiting:
            self._said[key] = holding.waiting
            self.manager.recorder.post(owner, "Normal", PODS_HELD, "; ".join(holding.waiting))
        return None


class ThroughGate:
    """The pods of each owner seen waiting at the gate by this process: let through by the
    ungater within the admission's caps. A live pod never seen gated was created without the
    gate (the pod webhooks off or down), or let through before this process started: only then
    is it worth comparing the running pods with the caps (``PodsBeyondQuota``)."""

    def __init__(self) -> None:
        self._seen_gated: dict[ObjectKey, set[str]] = {}

    def bypassed(self, key: ObjectKey, pods: Sequence[Mapping[str, Any]]) -> bool:
        """Record the gated pods; is any live ungated pod one never seen gated?"""
        seen = self._seen_gated.get(key, set())
        uids = {str(p["metadata"].get("uid")) for p in pods}
        seen &= uids  # pods gone are forgotten
        seen |= {str(p["metadata"].get("uid")) for p in pods if pod_gate.gated(p)}
        if seen:
            self._seen_gated[key] = seen
        else:
            self._seen_gated.pop(key, None)
        return any(
            str(p["metadata"].get("uid")) not in seen and not pod_gate.gated(p) and pod_gate.live(p)
            for p in pods
        )

    def forget(self, key: ObjectKey) -> None:
        self._seen_gated.pop(key, None)
