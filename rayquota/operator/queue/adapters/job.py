"""A batch/v1 Job under quota, as Kueue integrates it: gated by ``spec.suspend`` (the Job
controller creates no pods for a suspended Job and deletes them when a Job is suspended), one
pod set of ``parallelism`` pods (``completions`` if fewer), and the admitted flavor's
nodeSelector and tolerations written into its pod template before the gate lifts.

Kubernetes lets the pod template's scheduling fields change only while the Job is suspended
*and* ``status.startTime`` is unset; the Job controller keeps a suspended Job's start time, so
suspending a Job that ran also clears it (as Kueue does), and the template is edited only once
it is cleared.

With a topology assignment, the template also gets rayquota's scheduling gate (as Kueue's
topology gate): the Job controller creates the pods held, and the pod ungater lets each through
pinned to an assigned domain with room (`queue/gating/pod_gate.py`). This needs no webhook: the gate is
in the template before the Job may create a pod.

A Job owned by a RayJob (its submitter) runs on the RayJob's quota and is never queued alone;
so does a Job of a JobSet (`adapters/jobset.py`).
Partial admission (``kueue.x-k8s.io/job-min-parallelism``): :mod:`.job_partial`.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import replace
from typing import Any

from rayquota.operator.core import resources
from rayquota.operator.core.cache.informer import MODIFIED
from rayquota.operator.queue.adapters import job_partial
from rayquota.operator.queue.adapters.job_labels import JOB_NAME_LABEL, LEGACY_JOB_NAME_LABEL
from rayquota.operator.queue.adapters.multicluster import MultiClusterPart, whole_status
from rayquota.operator.queue.adapters.protocol import Body, Edit, Grant, PodWatch, TemplateAt
from rayquota.operator.queue.adapters.record_helpers import (
    CountsClaims,
    RunsAsOnePart,
    allocation_of,
    changed,
    edited,
    placements,
)
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.demand.podsets import Demand, GroupKey, Role, pod_set, single_part
from rayquota.operator.queue.dra.context import ClaimReading
from rayquota.operator.queue.gating import placement, pod_gate
from rayquota.operator.queue.workloads import event_filters
from rayquota.queueing import ResourceFlavor

# The Job's one pod set (and its group: every pod of a Job is alike).
JOB_POD_SET = "main"
JOB_GROUP: GroupKey = (Role.MAIN, "")
# Pods the Job controller created, by their Job's name.
JOB_PODS = PodWatch("job", JOB_NAME_LABEL, (JOB_NAME_LABEL, LEGACY_JOB_NAME_LABEL), "Job")


# The conditions that say a Job is finished.
FINISHED_CONDITIONS = ("Complete", "Failed")


def _finished_conditions(obj: Body) -> list[tuple[Any, Any]]:
    return [
        (c.get("type"), c.get("status"))
        for c in (obj.get("status") or {}).get("conditions") or []
        if c.get("type") in FINISHED_CONDITIONS
    ]


def _started(obj: Body) -> bool:
    return bool((obj.get("status") or {}).get("startTime"))


def job_changed(event: str, new: Body, old: Body | None) -> bool:
    """A Job's status moves with every pod (active, ready, succeeded counts); the Workload
    reconciler reads only whether it finished, and whether it has a start time."""
    if event != MODIFIED or old is None:
        return True
    view = event_filters.object_view
    return (
        view(new) != view(old)
        or _finished_conditions(new) != _finished_conditions(old)
        or _started(new) != _started(old)
    )


def clear_start_time(job: Body) -> list[Edit]:
    """The status patch that lets a suspended Job's pod template change again."""
    if not _started(job):
        return []
    meta = job["metadata"]
    body = {"metadata": {"name": meta["name"], "namespace": meta["namespace"]}, "status": {"startTime": None}}
    return [Edit("Job", body, status_patch=True)]


def _name(obj: Body) -> str:
    return str(obj["metadata"]["name"])


def job_pod_count(job: Body) -> int:
    """``parallelism`` (default 1), or ``completions`` when fewer are ever needed at once (as
    the Job asked for them: not lowered by a partial admission)."""
    parallelism, completions = job_partial.asked_counts(job)
    count = 1 if parallelism is None else parallelism
    if completions is not None:
        count = min(count, completions)
    return max(count, 0)


def job_demand(job: Body, claims: ClaimReading | None = None) -> Demand:
    template = (job.get("spec") or {}).get("template") or {}
    count = job_pod_count(job)
    main = pod_set(JOB_POD_SET, Role.MAIN, count, template, where="the Job's pod template", claims=claims)
    min_count = job_partial.min_parallelism(job)
    if min_count is not None and 0 < min_count < main.count:
        main = replace(main, min_count=min_count)
    return single_part(_name(job), [(JOB_GROUP, main)])


# Labels the API server puts on a Job's pod template for the Job (its uid) they belong to.
_JOB_TEMPLATE_LABELS = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    LEGACY_JOB_NAME_LABEL,
    JOB_NAME_LABEL,
)


def clean_copy(spec: MutableMapping[str, Any]) -> None:
    """MultiKueue: a copy's selector and template labels are its own Job's, not the original's."""
    spec.pop("selector", None)
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    for key in _JOB_TEMPLATE_LABELS:
        template_labels.pop(key, None)


def mirrored_status(local: Body, remote: Body) -> dict[str, Any] | None:
    """MultiKueue: Kubernetes refuses a running status on a suspended Job, so while the
    manager's Job is still suspended (its gate lifts as the check turns Ready) a running remote
    waits (None)."""
    if job_is_suspended(local) and not job_is_suspended(remote) and not job_finished(remote):
        return None
    return whole_status(local, remote)


def job_finished(job: Body) -> bool:
    """Has the Job a true Complete or Failed condition?"""
    return any(status == "True" for _, status in _finished_conditions(job))


def topology_assigned(admission: AdmittedSlice, pod_set: str) -> bool:
    """Does the admission place the pod set's pods in topology domains?"""
    return any(ps.name == pod_set and ps.topology is not None for ps in admission.pod_sets)


def job_is_suspended(job: Body) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


class JobAdapter(CountsClaims, RunsAsOnePart):
    kind = "Job"
    resource = resources.JOBS
    accounted_through = ("RayJob", "JobSet")
    child_kind = None
    pod_watches = (JOB_PODS,)
    own_part_pods = JOB_PODS
    children_held_at_pods = False
    change_filter = staticmethod(job_changed)
    grants: tuple[Grant, ...] = ((resources.JOBS, "update"), (resources.JOBS, "patch", "status"))
    multicluster = MultiClusterPart(status=mirrored_status, clean_spec=clean_copy)
    # Capability (adapters/capabilities.py, ``GatesItsOwnPods``): ``run_with`` gates its template.
    own_pods = JOB_PODS

    def pod_sets(self, obj: Body, children: Sequence[Body]) -> Demand:
        return job_demand(obj, self.claim_reading(obj))

    def group_of_pod(self, pod: Body) -> GroupKey:
        return JOB_GROUP

    def pod_templates(self, obj: Body) -> list[TemplateAt]:
        return [TemplateAt("spec.template", (obj.get("spec") or {}).get("template") or {})]

    def creation_refusal(self, obj: Body, queue: str) -> str | None:
        return job_partial.min_parallelism_refusal(obj, job_pod_count(obj))

    def suspend(self, obj: Body, children: Sequence[Body]) -> list[Edit]:
        return super().suspend(obj, children) + clear_start_time(obj)

    def run_with(
        self,
        obj: Body,
        children: Sequence[Body],
        admission: AdmittedSlice,
        flavors: Mapping[str, ResourceFlavor],
    ) -> list[Edit]:
        if self.is_suspended(obj) and _started(obj):
            return clear_start_time(obj)  # the template may change once it is cleared
        _, allocation = allocation_of(self, obj, children, admission)
        after = edited(obj)
        wanted = placements(admission, flavors).get(JOB_POD_SET)
        template = after["spec"].setdefault("template", {})
        if wanted is not None:
            placement.inject(template, wanted)
        if topology_assigned(admission, JOB_POD_SET):
            pod_gate.gate_template(template)
        if not self.is_suspended(obj) and after["spec"].get("template") != (obj.get("spec") or {}).get(
            "template"
        ):
            # Running without the placement (written unsuspended, admitted before the queue
            # suspended it): its template cannot change while it runs, so it stops first (the
            # Job controller deletes its pods) and starts again placed.
            return self.suspend(obj, children)
        partial = job_partial.run_partially(after, job_pod_count(obj), admission.counts().get(JOB_POD_SET))
        if allocation[_name(obj)].runs or partial:
            after["spec"]["suspend"] = False
        return changed(self.kind, obj, after)

    def restore(self, obj: Body, children: Sequence[Body]) -> list[Edit]:
        if _started(obj):
            return clear_start_time(obj)  # the template may change once it is cleared
        after = edited(obj)
        template = after["spec"].setdefault("template", {})
        placement.restore(template)
        pod_gate.ungate_template(template)
        job_partial.restore_parallelism(after)
        return changed(self.kind, obj, after)

    def finished(self, obj: Body) -> bool:
        return job_finished(obj)
