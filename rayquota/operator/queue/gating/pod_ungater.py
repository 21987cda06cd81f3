"""The pod ungater: lifts rayquota's scheduling gate from the pods the recorded admission covers
(`pod_gate.py` decides which), keyed by their RayCluster.

It runs in admission-only mode, where KubeRay's operator builds the pods: a cluster looks again
when one of its pods, the cluster itself, or the Workload it runs on changes. It reads what the
queue's gate reads (the cached Workloads' recorded admission), so after a crash no pod is let
through that a stored admission does not cover.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.core import Manager, ObjectKey, Result
from rayquota.operator.queue.adapters import CLUSTER_KIND
from rayquota.operator.queue.adapters.ray_kind import RAY_CLUSTER_PODS
from rayquota.operator.queue.gating import pod_gate
from rayquota.operator.queue.gating.gate import QueueGate
from rayquota.operator.queue.gating.pod_release import PodReleases, ThroughGate
from rayquota.operator.queue.objects import QueueObjects
from rayquota.operator.ray.vocabulary import labels


class PodUngater:
    def __init__(self, manager: Manager, objects: QueueObjects, gate: QueueGate) -> None:
        self.manager = manager
        self.objects = objects
        self.gate = gate
        self.releases = PodReleases(manager)
        self.through_gate = ThroughGate()

    def register(self) -> None:
        controller = self.manager.controller("pod-ungater", self.reconcile)
        controller.watch(self.objects.informers[CLUSTER_KIND])
        controller.watch(self.objects.pod_informers[RAY_CLUSTER_PODS.name], _cluster_of_pod, primary=False)
        controller.watch(self.objects.workloads, self._clusters_of_workload, primary=False)

    def _clusters_of_workload(self, workload: Mapping[str, Any]) -> list[ObjectKey]:
        """The clusters whose held pods a change of the Workload may let through: the object's
        children, or the object itself when it has none (a standalone RayCluster)."""
        queued = self.objects.owner_of_workload(ObjectKey.of(workload))
        if queued is None:
            return []
        if queued.adapter.child_kind is None:
            return [ObjectKey.of(queued.obj)]
        return [ObjectKey.of(c) for c in self.objects.children(queued.kind, queued.obj)]

    async def reconcile(self, key: ObjectKey) -> Result | None:
        held = self.objects.pods(RAY_CLUSTER_PODS, key.namespace, key.name)
        pods = [self.releases.as_released(p) for p in held]
        cluster = self.objects.informers[CLUSTER_KIND].store.get(key.namespace, key.name)
        if cluster is None:
            self.releases.forget(key)
            self.through_gate.forget(key)
            return None  # not cached yet (its event brings us back) or gone with its pods
        any_gated = any(pod_gate.gated(p) for p in pods)
        # The caps (the demand read against the admission) are read only when a pod waits at
        # the gate, or when a live pod runs that never waited there (created without the gate:
        # the pod webhooks are off or down). A pod the gate held was let through within them.
        bypassed = self.through_gate.bypassed(key, held)
        caps = self.gate.caps_for(cluster) if any_gated or bypassed else None
        # A suspended cluster's pods are KubeRay's to delete: not flagged meanwhile.
        suspended = bool((cluster.get("spec") or {}).get("suspend"))
        beyond = pod_gate.beyond_quota(caps, pods) if bypassed and not suspended else ()
        self.releases.flag_beyond(key, cluster, beyond)
        if not any_gated:
            self.releases.nothing_held(key)
            return None
        holding = pod_gate.releases(caps, pods)
        return await self.releases.apply(key, cluster, holding)


def _cluster_of_pod(pod: Mapping[str, Any]) -> list[ObjectKey]:
    cluster = (pod["metadata"].get("labels") or {}).get(labels.RAY_CLUSTER)
    return [ObjectKey(str(pod["metadata"]["namespace"]), str(cluster))] if cluster else []
