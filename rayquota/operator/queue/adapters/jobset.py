"""A JobSet (``jobset.x-k8s.io/v1alpha2``) under quota, as Kueue's ``jobset.x-k8s.io/jobset``
integration takes it: gated by ``spec.suspend`` (JobSet's controller suspends its Jobs, whose
pods the Job controller then deletes), one pod set per replicatedJob named after it of
``replicas`` times the pods of one of its Jobs (``parallelism``, default 1, or ``completions``
when fewer), and each admitted flavor's nodeSelector and tolerations written into that
replicatedJob's pod template before the gate lifts, taken out again when it stops.

JobSet's controller owns its CRD: rayquota does not install it. The resource is optional
(`core/resources.JOBSETS`): without the CRD the operator starts and logs that the kind waits for
it; the integration is on when the configuration's ``integrations.frameworks`` is unset or names
``jobset.x-k8s.io/jobset`` (`capabilities.OptionalIntegration`).

Its pods are the pods of its Jobs (Job -> JobSet): they carry ``jobset.sigs.k8s.io/jobset-name``
and ``jobset.sigs.k8s.io/replicatedjob-name``, which find them and their pod set. The Jobs are
accounted through it (`job.JobAdapter.accounted_through`) and their pods are held as a RayJob's
submitter's are: the pod webhook gates them and the Job pod ungater lets them through on the
admitted flavor, keyed by their Job (`gating/job_pod_ungater.py`); with a topology assignment the
gate is also written into the replicatedJob's template, so they are born held without the webhook.

Suspended (evicted, finished), its quota is free only once its pods are gone *and* each of its
Jobs is suspended, finished or being deleted (``StartsPodsThroughJobs``): JobSet's controller
suspends them a moment after the JobSet, and until then the Job controller may still start a
pod (a Job just resumed whose pods are not created yet, a failed pod replaced).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.operator.core import resources
from rayquota.operator.core.cache.informer import MODIFIED
from rayquota.operator.queue.adapters.job import job_finished, job_is_suspended
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

# Kueue's name for the integration (its configuration's ``integrations.frameworks``).
JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"
# What JobSet's controller labels its Jobs and their pods with.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
# The pods of a JobSet's Jobs, by the JobSet's name.
JOBSET_PODS = PodWatch("jobset", JOBSET_NAME_LABEL, (JOBSET_NAME_LABEL,), "JobSet")
# The conditions JobSet's controller says it finished with.
FINISHED_CONDITIONS = ("Completed", "Failed")


def replicated_jobs(obj: Body) -> list[Mapping[str, Any]]:
    return list((obj.get("spec") or {}).get("replicatedJobs") or [])


def _job_spec(replicated: Mapping[str, Any]) -> Mapping[str, Any]:
    return (replicated.get("template") or {}).get("spec") or {}


def pods_per_job(replicated: Mapping[str, Any]) -> int:
    """The pods one Job of a replicatedJob runs at once: ``parallelism`` (default 1), or
    ``completions`` when fewer (as Kueue counts them)."""
    spec = _job_spec(replicated)
    count = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
    completions = spec.get("completions")
    if completions is not None:
        count = min(count, int(completions))
    return max(count, 0)


def pod_count(replicated: Mapping[str, Any]) -> int:
    """``replicas`` (default 1) Jobs of ``pods_per_job`` pods each."""
    replicas = replicated.get("replicas")
    return (1 if replicas is None else int(replicas)) * pods_per_job(replicated)


def group_of(replicated_job: str) -> GroupKey:
    return (Role.MAIN, replicated_job)


def jobset_demand(obj: Body, claims: ClaimReading | None = None) -> Demand:
    keyed = []
    for index, replicated in enumerate(replicated_jobs(obj)):
        name = str(replicated.get("name") or "")
        template = _job_spec(replicated).get("template") or {}
        where = f"spec.replicatedJobs[{index}] ({name}) pod template"
        demand = pod_set(name, Role.MAIN, pod_count(replicated), template, where=where, claims=claims)
        keyed.append((group_of(name), demand))
    return single_part(_name(obj), keyed)


def _name(obj: Body) -> str:
    return str(obj["metadata"]["name"])


def _finished_conditions(obj: Body) -> list[tuple[Any, Any]]:
    return [
        (c.get("type"), c.get("status"))
        for c in (obj.get("status") or {}).get("conditions") or []
        if c.get("type") in FINISHED_CONDITIONS
    ]


def jobset_changed(event: str, new: Body, old: Body | None) -> bool:
    """A JobSet's status moves with its Jobs (replicatedJobsStatus); the Workload reconciler
    reads only whether it finished."""
    if event != MODIFIED or old is None:
        return True
    view = event_filters.object_view
    return view(new) != view(old) or _finished_conditions(new) != _finished_conditions(old)


def _templates(after: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(replicatedJob name, its pod template) of an edited copy, templates created if absent."""
    out = []
    for replicated in after.get("spec", {}).get("replicatedJobs") or []:
        job = replicated.setdefault("template", {}).setdefault("spec", {})
        out.append((str(replicated.get("name") or ""), job.setdefault("template", {})))
    return out


class JobSetAdapter(CountsClaims, RunsAsOnePart):
    kind = "JobSet"
    resource = resources.JOBSETS
    accounted_through: tuple[str, ...] = ()
    child_kind = None
    pod_watches = (JOBSET_PODS,)
    own_part_pods = JOBSET_PODS
    children_held_at_pods = False
    change_filter = staticmethod(jobset_changed)
    grants: tuple[Grant, ...] = ((resources.JOBSETS, "update"),)
    multicluster = None
    # Capability (adapters/capabilities.py, ``OptionalIntegration``): on by the configuration.
    framework = JOBSET_FRAMEWORK

    def pod_sets(self, obj: Body, children: Sequence[Body]) -> Demand:
        return jobset_demand(obj, self.claim_reading(obj))

    def group_of_pod(self, pod: Body) -> GroupKey:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        return group_of(str(labels.get(REPLICATED_JOB_LABEL) or ""))

    def pod_templates(self, obj: Body) -> list[TemplateAt]:
        return [
            TemplateAt(f"spec.replicatedJobs[{i}].template.spec.template", _job_spec(r).get("template") or {})
            for i, r in enumerate(replicated_jobs(obj))
        ]

    def creation_refusal(self, obj: Body, queue: str) -> str | None:
        names = [str(r.get("name") or "") for r in replicated_jobs(obj)]
        if not names:
            return "spec.replicatedJobs: Required value: a queued JobSet needs at least one replicatedJob"
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            return f"spec.replicatedJobs: Duplicate value: {repeated[0]!r}: each names its own pod set"
        return None

    def run_with(
        self,
        obj: Body,
        children: Sequence[Body],
        admission: AdmittedSlice,
        flavors: Mapping[str, ResourceFlavor],
    ) -> list[Edit]:
        _, allocation = allocation_of(self, obj, children, admission)
        after = edited(obj)
        wanted = placements(admission, flavors)
        topology = {ps.name for ps in admission.pod_sets if ps.topology is not None}
        for name, template in _templates(after):
            if name in wanted:
                placement.inject(template, wanted[name])
            if name in topology:
                pod_gate.gate_template(template)
        if not self.is_suspended(obj) and after["spec"].get("replicatedJobs") != (obj.get("spec") or {}).get(
            "replicatedJobs"
        ):
            # Running without the placement (written unsuspended, admitted before the queue
            # suspended it): it stops first and starts again placed.
            return self.suspend(obj, children)
        if allocation[_name(obj)].runs:
            after["spec"]["suspend"] = False
        return changed(self.kind, obj, after)

    def restore(self, obj: Body, children: Sequence[Body]) -> list[Edit]:
        after = edited(obj)
        for _, template in _templates(after):
            placement.restore(template)
            pod_gate.ungate_template(template)
        return changed(self.kind, obj, after)

    def finished(self, obj: Body) -> bool:
        return any(status == "True" for _, status in _finished_conditions(obj))

    def jobs_stopped(self, jobs: Sequence[Body]) -> bool:
        return all(job_stopped(job) for job in jobs)


def job_stopped(job: Body) -> bool:
    """Can the Job controller start no pod for this Job any more?"""
    being_deleted = bool((job.get("metadata") or {}).get("deletionTimestamp"))
    return job_is_suspended(job) or being_deleted or job_finished(job)
