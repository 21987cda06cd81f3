"""The Job pod ungater: lifts rayquota's scheduling gate from the pods of batch/v1 Jobs the
recorded admission covers, keyed by their Job: a queued Job's own pods, the pods of a queued
RayJob's submitter Job (KubeRay's or rayquota's), and the pods of a queued JobSet's Jobs (each
in its replicatedJob's pod set).

A queued Job whose admission assigned topology domains carries the gate in its pod template
(`adapters/job.py`); a submitter's pod gets it from its template (rayquota's own RayJob
reconciler) or from the pod webhook (beside KubeRay's operator, which writes the template). Each
pod is let through with its flavor's nodeSelector and tolerations and, with a topology
assignment, pinned to a domain with room, never more pods in a domain than assigned (as Kueue's
topology ungater does). It reads the cached Workloads' recorded admission, as the queue's gate
does, so after a crash no pod is let through that a stored admission does not cover. Pods of a
Job under no quota that the webhook held while the cache did not show their Job yet go through
as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.operator.core import Informer, Manager, ObjectKey, Result
from rayquota.operator.core.gate import ANYWHERE
from rayquota.operator.queue.adapters.capabilities import GatesItsOwnPods
from rayquota.operator.queue.adapters.job import JOB_PODS
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.demand.podsets import Demand, Role
from rayquota.operator.queue.gating import caps, pod_gate
from rayquota.operator.queue.gating.gate import QueueGate, recorded_admission
from rayquota.operator.queue.gating.pod_release import PodReleases
from rayquota.operator.queue.gating.topology_caps import domains
from rayquota.operator.queue.objects import OWNER_INDEX, Queued, QueueObjects
from rayquota.queueing import ResourceFlavor

# The roles whose pods a Job creates: a queued Job's own, a RayJob's submitter.
JOB_ROLES = (Role.MAIN, Role.SUBMITTER)
JOB_KIND = JOB_PODS.owner_kind


def job_pod_set(demand: Demand) -> str | None:
    """The pod set a Job's pods count in: the queued Job's, or its RayJob's submitter."""
    for groups in demand.pod_set_of.values():
        for (role, _), name in groups.items():
            if role in JOB_ROLES:
                return name
    return None


def pod_set_of_job(queued: Queued, job: Mapping[str, Any], demand: Demand) -> str | None:
    """The pod set the Job's pods count in: the one its record puts a pod of the Job's template
    in (a JobSet's Job: its replicatedJob's), else the one pod set of a Job's role."""
    template_meta = ((job.get("spec") or {}).get("template") or {}).get("metadata") or {}
    group = queued.adapter.group_of_pod(
        {"metadata": {**template_meta, "namespace": job["metadata"].get("namespace")}}
    )
    if group[0] in JOB_ROLES:
        for groups in demand.pod_set_of.values():
            if group in groups:
                return groups[group]
    return job_pod_set(demand)


def job_pods_of_its_own(queued: Queued) -> bool:
    """Is the queued object a Job holding its own pods (``GatesItsOwnPods`` in the Job pod
    watch), rather than an owner of Jobs (a RayJob, whose submitter's pods are held)?"""
    adapter = queued.adapter
    return isinstance(adapter, GatesItsOwnPods) and adapter.own_pods == JOB_PODS


def room_of(
    admission: AdmittedSlice | None, pod_set: str | None, flavors: Mapping[str, ResourceFlavor]
) -> pod_gate.PodSetRoom:
    """What the recorded admission gives the pod set (fail closed: nothing it cannot place)."""
    if admission is None:
        return pod_gate.PodSetRoom(0, ANYWHERE, why_none="not admitted")
    assigned = next((ps for ps in admission.pod_sets if ps.name == pod_set), None)
    if assigned is None:
        return pod_gate.PodSetRoom(0, ANYWHERE, why_none=f"the admission covers no pod set {pod_set!r}")
    placements = caps.admitted_placements(admission, flavors)
    if placements is None:
        return pod_gate.PodSetRoom(0, ANYWHERE, why_none="an admitted flavor is not known yet")
    assigned_domains = domains(assigned.topology) if assigned.topology is not None else None
    return pod_gate.PodSetRoom(assigned.count, placements[assigned.name], assigned_domains)


class JobPodUngater:
    def __init__(self, manager: Manager, objects: QueueObjects, gate: QueueGate) -> None:
        self.manager = manager
        self.objects = objects
        self.gate = gate
        self.releases = PodReleases(manager)

    @property
    def jobs(self) -> Informer:
        return self.objects.informers[JOB_KIND]

    def register(self) -> None:
        controller = self.manager.controller("job-pod-ungater", self.reconcile)
        controller.watch(self.jobs)
        controller.watch(self.objects.pod_informers[JOB_PODS.name], _job_of_pod, primary=False)
        controller.watch(self.objects.workloads, self._jobs_of_workload, primary=False)

    def _jobs_of_workload(self, workload: Mapping[str, Any]) -> list[ObjectKey]:
        """The Jobs whose held pods a change of the Workload may let through: the queued Job, or
        the Jobs its queued object owns (a RayJob's submitter)."""
        queued = self.objects.owner_of_workload(ObjectKey.of(workload))
        if queued is None:
            return []
        if job_pods_of_its_own(queued):
            return [ObjectKey.of(queued.obj)]
        owned = self.jobs.store.by_index(OWNER_INDEX, str(queued.obj["metadata"]["uid"]))
        return [ObjectKey.of(job) for job in owned]

    def _room(self, job: Mapping[str, Any]) -> pod_gate.PodSetRoom | None:
        """None: the Job is under no quota."""
        queued = self.objects.queued_owner(JOB_KIND, job)
        if queued is None:
            return None
        children = self.objects.children(queued.kind, queued.obj)
        demand = queued.adapter.pod_sets(queued.obj, children)
        admission = recorded_admission(self.objects.workload(queued.workload))
        return room_of(admission, pod_set_of_job(queued, job, demand), self.gate.flavors)

    async def reconcile(self, key: ObjectKey) -> Result | None:
        pods = [self.releases.as_released(p) for p in self.objects.pods(JOB_PODS, key.namespace, key.name)]
        if not any(pod_gate.gated(p) for p in pods):
            self.releases.nothing_held(key)
            return None
        job = self.jobs.store.get(key.namespace, key.name)
        if job is None:
            return None  # not cached yet (its event brings us back) or gone with its pods
        holding = pod_gate.pod_set_releases(self._room(job), _owned_by(job, pods))
        return await self.releases.apply(key, job, holding)


def _owned_by(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pods of this Job (an older Job of the same name may have left some behind)."""
    uid = job["metadata"].get("uid")
    return [
        p for p in pods if any(ref.get("uid") == uid for ref in p["metadata"].get("ownerReferences") or ())
    ]


def _job_of_pod(pod: Mapping[str, Any]) -> list[ObjectKey]:
    keys = JOB_PODS.index(pod)
    if not keys:
        return []
    namespace, _, name = keys[0].partition("/")
    return [ObjectKey(namespace, name)]
