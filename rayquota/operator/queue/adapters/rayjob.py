"""A RayJob under quota: gated by its own ``spec.suspend``; its cluster and submitter
templates get the admitted flavors before the gate lifts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.api.ray_v1 import JobDeploymentStatus
from rayquota.operator.core import resources
from rayquota.operator.core.cache.informer import MODIFIED
from rayquota.operator.core.memo import BoundedMemo
from rayquota.operator.queue.adapters.job import topology_assigned
from rayquota.operator.queue.adapters.job_labels import JOB_NAME_LABEL, LEGACY_JOB_NAME_LABEL
from rayquota.operator.queue.adapters.multicluster import MultiClusterPart
from rayquota.operator.queue.adapters.protocol import Body, Edit, Grant, PodLookup, PodWatch, TemplateAt
from rayquota.operator.queue.adapters.ray_kind import (
    RAY_CLUSTER_PODS,
    RayKind,
    cluster_spec_templates,
    cluster_templates,
    inject_cluster,
    restore_cluster,
)
from rayquota.operator.queue.adapters.record_helpers import (
    SpecSuspendKind,
    allocation_of,
    changed,
    edited,
    placements,
)
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.demand.podsets import (
    SUBMITTER_POD_SET,
    Demand,
    GroupKey,
    PodSetDemand,
    Role,
    cluster_pod_sets,
    pod_set,
    single_part,
)
from rayquota.operator.queue.dra import context as dra
from rayquota.operator.queue.dra.context import ClaimReading, ClaimSource
from rayquota.operator.queue.gating import placement, pod_gate
from rayquota.operator.queue.workloads import event_filters
from rayquota.operator.ray.dashboard_api.resolver import dashboard_port
from rayquota.operator.ray.rayjob import submitter
from rayquota.operator.ray.vocabulary import labels
from rayquota.operator.ray.vocabulary.labels import submission_mode
from rayquota.queueing import ResourceFlavor

# The pods of RayJobs' submitter Jobs (K8sJobMode), by their Job's name (the RayJob's): they
# hold quota too, and are found even once the Job and the RayJob are gone.
SUBMITTER_PODS = PodWatch(
    "rayjob-submitter", f"{labels.RAY_JOB_SUBMITTER}=true", (JOB_NAME_LABEL, LEGACY_JOB_NAME_LABEL), "RayJob"
)

# A RayJob in these states runs nothing any more (ValidationFailed never ran): no quota.
FINISHED_STATES = (
    JobDeploymentStatus.COMPLETE,
    JobDeploymentStatus.FAILED,
    JobDeploymentStatus.VALIDATION_FAILED,
)


def cluster_name(rayjob: Body) -> str | None:
    name = (rayjob.get("status") or {}).get("rayClusterName")
    return str(name) if name else None


def _submitter_template(rayjob: Mapping[str, Any]) -> Mapping[str, Any]:
    try:
        job = submitter.submitter_job(rayjob, "", "", "")
    except ValueError:
        # A malformed runtime env fails validation; the RayJob never runs, the shape barely matters.
        return {"spec": (rayjob.get("spec") or {}).get("submitterPodTemplate", {}).get("spec") or {}}
    template: Mapping[str, Any] = job["spec"]["template"]
    return template


# Kueue's opt-in for a job whose size changes while it runs (its ElasticJobsViaWorkloadSlices).
ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"


def is_elastic(rayjob: Mapping[str, Any], *, annotation_required: bool) -> bool:
    """A RayJob whose own cluster autoscales is elastic: charged by the worker sizes its live
    cluster has (the autoscaler's), in slices. In rayquota.io that is the default; in Kueue-API
    mode (``annotation_required``) only with Kueue's ``kueue.x-k8s.io/elastic-job: "true"``.
    The annotation set to anything else turns it off in both."""
    spec = rayjob.get("spec") or {}
    if spec.get("clusterSelector") or not (spec.get("rayClusterSpec") or {}).get("enableInTreeAutoscaling"):
        return False
    said = (rayjob["metadata"].get("annotations") or {}).get(ELASTIC_JOB_ANNOTATION)
    if said is not None:
        return str(said) == "true"
    return not annotation_required


def with_live_sizes(cluster_spec: Mapping[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
    """The RayJob's cluster spec with each worker group's ``replicas`` as its live cluster has
    them (where the autoscaler writes them); nothing else of the live cluster is read."""
    sizes = {
        str(g.get("groupName")): g.get("replicas")
        for g in (live.get("spec") or {}).get("workerGroupSpecs") or ()
    }
    spec = dict(cluster_spec)
    groups = []
    for group in cluster_spec.get("workerGroupSpecs") or ():
        name = str(group.get("groupName"))
        groups.append({**group, "replicas": sizes[name]} if sizes.get(name) is not None else group)
    spec["workerGroupSpecs"] = groups
    return spec


def rayjob_demand(
    rayjob: Mapping[str, Any],
    cluster_name: str | None = None,
    live: Mapping[str, Any] | None = None,
    claims: ClaimReading | None = None,
) -> Demand:
    """Head (+ autoscaler, + the submitter sidecar in SidecarMode), workers, and the
    submitter Job's pod in K8sJobMode. A RayJob on an existing cluster (clusterSelector)
    asks only for its submitter. ``live``: its cluster, whose worker sizes count (elastic);
    ``claims``: the reading its templates' DRA claims are counted under."""
    spec = rayjob.get("spec") or {}
    mode = submission_mode(rayjob)
    keyed: list[tuple[GroupKey, PodSetDemand]] = []
    cluster_spec = spec.get("rayClusterSpec")
    if cluster_spec and live is not None:
        cluster_spec = with_live_sizes(cluster_spec, live)
    if cluster_spec and not spec.get("clusterSelector"):
        head_extra: list[Mapping[str, Any]] = []
        if mode == "SidecarMode":
            port = dashboard_port({"spec": cluster_spec})
            head_extra.append(submitter.sidecar_container(rayjob, "", "", port))
        annotations = rayjob["metadata"].get("annotations")
        keyed.extend(cluster_pod_sets(cluster_spec, head_extra, annotations, claims))
    if mode == "K8sJobMode":
        keyed.append(
            (
                (Role.SUBMITTER, ""),
                pod_set(
                    SUBMITTER_POD_SET,
                    Role.SUBMITTER,
                    1,
                    _submitter_template(rayjob),
                    where="the submitter's pod template",
                    claims=claims,
                ),
            )
        )
    part = cluster_name or str(rayjob["metadata"]["name"])
    return single_part(part, keyed)


# The RayJob status fields the Workload reconciler reads (finished, cluster_name).
RAYJOB_STATUS_READ = ("jobDeploymentStatus", "rayClusterName")


def rayjob_changed(event: str, new: Body, old: Body | None) -> bool:
    if event != MODIFIED or old is None:
        return True
    status, old_status = new.get("status") or {}, old.get("status") or {}
    return event_filters.object_view(new) != event_filters.object_view(old) or any(
        status.get(field) != old_status.get(field) for field in RAYJOB_STATUS_READ
    )


# Demands remembered per RayJob spec; the oldest are dropped beyond this many.
DEMAND_MEMO_SIZE = 20_000


class RayJobAdapter(RayKind, SpecSuspendKind):
    kind = "RayJob"
    resource = resources.RAYJOBS
    pod_watches = (RAY_CLUSTER_PODS, SUBMITTER_PODS)
    change_filter = staticmethod(rayjob_changed)
    grants: tuple[Grant, ...] = ((resources.RAYJOBS, "update"), (resources.RAYCLUSTERS, "update"))
    # Created once in the worker; its status (jobStatus, jobDeploymentStatus, ...) comes back.
    multicluster = MultiClusterPart()

    def __init__(
        self, *, elastic_by_annotation_only: bool = False, claims: ClaimSource | None = None
    ) -> None:
        """``elastic_by_annotation_only``: Kueue-API mode, where a RayJob is elastic only with
        Kueue's annotation (see :func:`is_elastic`). ``claims``: see ``CountsClaims``."""
        super().__init__(claims=claims)
        self.elastic_by_annotation_only = elastic_by_annotation_only
        # The demand is a pure function of the spec, name and labels, but it is asked for on
        # every event of the RayJob, its cluster and its pods (the Workload reconciler, the
        # gate): parsing the templates' quantities each time dominated the operator under a
        # flood. A spec change bumps the generation, so the memo never answers for an old spec.
        self._demands: BoundedMemo[tuple[object, ...], Demand] = BoundedMemo(DEMAND_MEMO_SIZE)

    def pod_sets(self, obj: Body, children: Sequence[Body]) -> Demand:
        reading = self.claim_reading(obj)
        part = str(children[0]["metadata"]["name"]) if children else cluster_name(obj)
        meta = obj["metadata"]
        uid, generation = meta.get("uid"), meta.get("generation")
        templates = (at.template.get("spec") or {} for at in self.pod_templates(obj))
        live = None
        if children and self.is_elastic(obj):
            live = children[0]
        if uid is None or generation is None or dra.reads_other_objects(templates, reading):
            return rayjob_demand(obj, part, live, reading)
        # An elastic RayJob's demand changes with its cluster's spec (its generation) too.
        live_generation = None if live is None else live["metadata"].get("generation")
        labels_key = tuple(sorted((meta.get("labels") or {}).items()))
        memo_key = (uid, generation, part, labels_key, live is not None, live_generation)
        return self._demands.get(memo_key, lambda: rayjob_demand(obj, part, live, reading))

    def is_elastic(self, obj: Body) -> bool:
        """Sized by its live cluster (see :func:`is_elastic`), in this operator's mode."""
        return is_elastic(obj, annotation_required=self.elastic_by_annotation_only)

    def running_parts(self, obj: Body, children: Sequence[Body]) -> set[str]:
        return set() if self.is_suspended(obj) else set(self.pod_sets(obj, children).parts)

    # Capabilities (adapters/capabilities.py).

    child_marker = (labels.ORIGINATED_FROM_CRD, "RayJob")

    def capped_with(self, children: Sequence[Body], part: str) -> list[Body]:
        """A retry's new cluster is capped by itself; the old one's pods count as held elsewhere."""
        return [c for c in children if c["metadata"]["name"] == part]

    def part_templates(self, obj: Body, children: Sequence[Body], part: str) -> list[tuple[GroupKey, Body]]:
        """Its clusters are built from its own cluster spec, its submitter from its template."""
        spec = obj.get("spec") or {}
        cluster_spec = dict(spec.get("rayClusterSpec") or {})
        templates: list[tuple[GroupKey, Body]] = list(cluster_templates(cluster_spec))
        if submission_mode(obj) == "K8sJobMode":
            templates.append(((Role.SUBMITTER, ""), spec.get("submitterPodTemplate") or {}))
        return templates

    def pod_templates(self, obj: Body) -> list[TemplateAt]:
        spec = obj.get("spec") or {}
        out = []
        if spec.get("submitterPodTemplate"):
            out.append(TemplateAt("spec.submitterPodTemplate", spec["submitterPodTemplate"]))
        return out + cluster_spec_templates("spec.rayClusterSpec", spec.get("rayClusterSpec") or {})

    def creation_refusal(self, obj: Body, queue: str) -> str | None:
        """Kueue's rule for a queued RayJob, said at creation: the queue suspends it, and KubeRay
        lets a suspended RayJob run only if its cluster goes when the job ends (else the cluster
        would keep the queue's quota after the work is done)."""
        spec = obj.get("spec") or {}
        if spec.get("clusterSelector") or spec.get("shutdownAfterJobFinishes"):
            return None
        value = spec.get("shutdownAfterJobFinishes")
        said = "unset" if value is None else json.dumps(value)
        return (
            f"spec.shutdownAfterJobFinishes: {said}: a RayJob in queue {queue} "
            "must set spec.shutdownAfterJobFinishes: true (the queue suspends it until admitted, and "
            "its RayCluster would otherwise hold the queue's quota after the job ends)"
        )

    def cluster_names(self, obj: Body, children: Sequence[Body]) -> list[str]:
        names = [str(c["metadata"]["name"]) for c in children]
        if not names and cluster_name(obj):
            names = [str(cluster_name(obj))]
        return names

    def pods_by_part(
        self, pods: PodLookup, obj: Body, children: Sequence[Body], known: Sequence[str]
    ) -> dict[str, list[Any]]:
        by_part = super().pods_by_part(pods, obj, children, known)
        meta = obj["metadata"]
        submitters = pods.pods(SUBMITTER_PODS, str(meta["namespace"]), str(meta["name"]))
        if submitters:
            # The submitter belongs to the RayJob's one part (named after its cluster, or after
            # the RayJob while it has none).
            names = self.cluster_names(obj, children) + list(known)
            part = names[0] if names else str(meta["name"])
            by_part[part] = [*by_part.get(part, []), *submitters]
        return by_part

    def run_with(
        self,
        obj: Body,
        children: Sequence[Body],
        admission: AdmittedSlice,
        flavors: Mapping[str, ResourceFlavor],
    ) -> list[Edit]:
        demand, allocation = allocation_of(self, obj, children, admission)
        after = edited(obj)
        spec = after["spec"]
        by_pod_set = placements(admission, flavors)
        # A cluster created before this admission (by an older operator, or before the gate
        # closed) gets the placement too, before the gate lifts: its planner replaces the pods
        # built without it.
        edits: list[Edit] = []
        for child in children:
            placed = edited(child)
            for part in demand.parts:
                inject_cluster(placed["spec"], demand.pod_set_of[part], by_pod_set)
            edits += changed("RayCluster", child, placed)
        for part in demand.parts:
            if spec.get("rayClusterSpec"):
                inject_cluster(spec["rayClusterSpec"], demand.pod_set_of[part], by_pod_set)
            submitter_set = demand.pod_set_of[part].get((Role.SUBMITTER, ""), "")
            wanted = by_pod_set.get(submitter_set)
            if wanted and (wanted["nodeSelector"] or wanted["tolerations"]):
                placement.inject(spec.setdefault("submitterPodTemplate", {}), wanted)
            if submitter_set and topology_assigned(admission, submitter_set):
                # Its pod is born held; the pod ungater pins it to its assigned domain.
                pod_gate.gate_template(spec.setdefault("submitterPodTemplate", {}))
        if all(a.runs for a in allocation.values()):
            spec["suspend"] = False
        return edits + changed(self.kind, obj, after)

    def restore(self, obj: Body, children: Sequence[Body]) -> list[Edit]:
        after = edited(obj)
        spec = after["spec"]
        if spec.get("rayClusterSpec"):
            restore_cluster(spec["rayClusterSpec"])
        if "submitterPodTemplate" in spec:
            placement.restore(spec["submitterPodTemplate"])
            pod_gate.ungate_template(spec["submitterPodTemplate"])
            if not spec["submitterPodTemplate"].get("spec") and len(spec["submitterPodTemplate"]) <= 1:
                del spec["submitterPodTemplate"]  # we created it only to carry the placement
        return changed(self.kind, obj, after)

    def finished(self, obj: Body) -> bool:
        return (obj.get("status") or {}).get("jobDeploymentStatus") in FINISHED_STATES
