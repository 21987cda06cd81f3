"""What a RayCluster's pods should be: pure functions over the RayCluster body and its live pods.

`plan_cluster` says which pods to create, delete or re-stamp; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rayquota.operator.core.pods import pod_finished as is_finished
from rayquota.operator.ray.builders import topology_pins
from rayquota.operator.ray.builders.hashing import spec_hash
from rayquota.operator.ray.builders.podspec import PodContext, build_head_pod, build_worker_pod
from rayquota.operator.ray.raycluster import caps as caps_module
from rayquota.operator.ray.raycluster.admitted_caps import AdmittedCaps
from rayquota.operator.ray.raycluster.feature_validation import feature_errors
from rayquota.operator.ray.vocabulary import conditions, labels

PROVISIONED = "RayClusterProvisioned"
HEAD_POD_READY = "HeadPodReady"
REPLICA_FAILURE = "ReplicaFailure"
SUSPENDING = "RayClusterSuspending"
SUSPENDED = "RayClusterSuspended"

RECREATE = "Recreate"
MANAGED_BY_PARENTS = ("RayJob", "RayService")


# --- pod facts --------------------------------------------------------------------------------


def is_terminating(pod: Mapping[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def is_active(pod: Mapping[str, Any]) -> bool:
    return not is_terminating(pod) and not is_finished(pod)


def is_running(pod: Mapping[str, Any]) -> bool:
    return is_active(pod) and (pod.get("status") or {}).get("phase") == "Running"


def is_ready(pod: Mapping[str, Any]) -> bool:
    if not is_running(pod):
        return False
    pod_conditions = (pod.get("status") or {}).get("conditions")
    return conditions.is_true(pod_conditions, "Ready")


def node_type(pod: Mapping[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get(labels.RAY_NODE_TYPE, ""))


def group_of(pod: Mapping[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get(labels.RAY_GROUP, ""))


def _age_key(pod: Mapping[str, Any]) -> tuple[str, str]:
    return (str(pod["metadata"].get("creationTimestamp", "")), str(pod["metadata"]["name"]))


# --- spec facts -------------------------------------------------------------------------------


def worker_groups(cluster: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(cluster.get("spec", {}).get("workerGroupSpecs") or [])


def group_bounds(group: Mapping[str, Any]) -> tuple[int, int, int]:
    """(desired replicas, min, max), replicas clamped into [min, max] as KubeRay does."""
    minimum = int(group.get("minReplicas") or 0)
    max_replicas = group.get("maxReplicas")
    maximum = 2**31 - 1 if max_replicas is None else int(max_replicas)
    replicas = group.get("replicas")
    replicas = minimum if replicas is None else int(replicas)
    return max(minimum, min(replicas, maximum)), minimum, maximum


def desired_pods(group: Mapping[str, Any], cluster_suspended: bool = False) -> int:
    if cluster_suspended or group.get("suspend"):
        return 0
    replicas, _, _ = group_bounds(group)
    return replicas * int(group.get("numOfHosts") or 1)


def upgrade_strategy(cluster: Mapping[str, Any]) -> str | None:
    strategy = cluster.get("spec", {}).get("upgradeStrategy") or {}
    return strategy.get("type")


def originating_crd(cluster: Mapping[str, Any]) -> str | None:
    return (cluster["metadata"].get("labels") or {}).get(labels.ORIGINATED_FROM_CRD)


def validate_cluster(cluster: Mapping[str, Any], allowed: Collection[str] = ()) -> list[str]:
    """KubeRay's RayCluster validation rules that the CRD schema cannot express (``allowed``: gated
    fields whose feature gate is on)."""
    errors: list[str] = []
    spec = cluster.get("spec") or {}
    head = spec.get("headGroupSpec") or {}
    if not ((head.get("template") or {}).get("spec") or {}).get("containers"):
        errors.append("spec.headGroupSpec.template.spec.containers must not be empty")
    seen: set[str] = set()
    for i, group in enumerate(worker_groups(cluster)):
        name = group.get("groupName") or ""
        if not name:
            errors.append(f"spec.workerGroupSpecs[{i}].groupName must not be empty")
        elif name in seen:
            errors.append(f"spec.workerGroupSpecs[{i}].groupName {name!r} is used by more than one group")
        seen.add(name)
        if not ((group.get("template") or {}).get("spec") or {}).get("containers"):
            errors.append(f"spec.workerGroupSpecs[{i}].template.spec.containers must not be empty")
        _, minimum, maximum = group_bounds(group)
        if minimum > maximum:
            errors.append(f"spec.workerGroupSpecs[{i}]: minReplicas ({minimum}) > maxReplicas ({maximum})")
        if group.get("suspend") and spec.get("enableInTreeAutoscaling"):
            errors.append(f"spec.workerGroupSpecs[{i}].suspend cannot be used with enableInTreeAutoscaling")
    errors += feature_errors(spec, cluster["metadata"].get("annotations") or {}, "spec", allowed=allowed)
    parent = originating_crd(cluster)
    if parent in MANAGED_BY_PARENTS and upgrade_strategy(cluster) is not None:
        errors.append(
            f"spec.upgradeStrategy is not allowed on a RayCluster created by a {parent}; "
            f"set the {parent}'s own upgrade settings instead"
        )
    return errors


# --- the plan ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodDeletion:
    pod: Mapping[str, Any]
    reason: str
    message: str


@dataclass
class ClusterPlan:
    create: list[dict[str, Any]] = field(default_factory=list)
    delete: list[PodDeletion] = field(default_factory=list)
    restamp: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    suspending: bool = False
    suspended: bool = False
    recreating: bool = False
    # Under quota: why pods the spec asks for are not created yet (placement not in the
    # template, or the admitted budget is held by pods still alive).
    waiting: list[str] = field(default_factory=list)

    @property
    def changes_pods(self) -> bool:
        return bool(self.create or self.delete or self.restamp)


def _was(cluster: Mapping[str, Any], condition: str) -> bool:
    return conditions.is_true((cluster.get("status") or {}).get("conditions"), condition)


def _head_restart_disabled(cluster: Mapping[str, Any]) -> bool:
    """KubeRay's ``ray.io/disable-provisioned-head-restart: "true"`` (its SidecarMode RayJobs set it:
    a new head would not run the job again): once provisioned, a lost head is not replaced."""
    annotations = cluster["metadata"].get("annotations") or {}
    return annotations.get(labels.DISABLE_PROVISIONED_HEAD_RESTART) == "true" and _was(cluster, PROVISIONED)


def plan_cluster(
    cluster: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    operator_version: str,
    caps: AdmittedCaps | None = None,
    cluster_domain: str = labels.DEFAULT_CLUSTER_DOMAIN,
    allowed: Collection[str] = (),
) -> ClusterPlan:
    """The pod changes that bring the cluster to its spec.

    `caps` (the admitted quota, when the cluster is under quota control) bounds what may exist:
    no head unless `caps.head`, and never more pods in a worker group than its cap, whatever the
    spec asks for; pods beyond a cap are removed like a scale-down. No pod is built from a
    template that lacks the admitted placement, a live pod that lacks it is replaced, and a new
    pod waits while the cluster's pods (terminating ones too) hold its share of the budget
    (see raycluster_caps).
    """
    plan = ClusterPlan(errors=validate_cluster(cluster, allowed))
    if plan.errors:
        return plan
    spec = cluster["spec"]
    live = [p for p in pods if not is_terminating(p)]

    # Suspension is atomic: once started it finishes even if suspend is flipped back meanwhile.
    if spec.get("suspend") or _was(cluster, SUSPENDING):
        _plan_suspension(plan, pods, live)
        return plan

    current_hash = spec_hash(spec)
    active = [p for p in live if is_active(p)]
    heads = sorted((p for p in active if node_type(p) == labels.HEAD_NODE), key=_age_key)
    if _plan_restamp_or_recreate(plan, cluster, live, active, heads, operator_version, current_hash):
        return plan

    ctx = PodContext(cluster, operator_version, current_hash, cluster_domain)
    for pod in live:
        if is_finished(pod):
            phase = pod["status"]["phase"]
            plan.delete.append(PodDeletion(pod, "ReplacePod", f"pod {phase}; it will be replaced"))

    names = [str(g.get("groupName")) for g in worker_groups(cluster)]
    placed = [p for p in active if not _replace_misplaced(plan, caps, p, names)]
    placed_ids = {id(p) for p in placed}
    _plan_head(plan, ctx, caps, [p for p in heads if id(p) in placed_ids])
    _plan_worker_groups(plan, ctx, caps, [p for p in placed if node_type(p) == labels.WORKER_NODE])
    _hold_to_admitted(plan, caps, pods)
    return plan


def _plan_suspension(
    plan: ClusterPlan, pods: Sequence[Mapping[str, Any]], live: Sequence[Mapping[str, Any]]
) -> None:
    """Delete every live pod; suspending while any pod (terminating ones too) remains."""
    for pod in live:
        plan.delete.append(PodDeletion(pod, "Suspend", "the RayCluster is suspended"))
    plan.suspending = bool(pods)
    plan.suspended = not pods


def _plan_restamp_or_recreate(
    plan: ClusterPlan,
    cluster: Mapping[str, Any],
    live: Sequence[Mapping[str, Any]],
    active: Sequence[Mapping[str, Any]],
    heads: Sequence[Mapping[str, Any]],
    operator_version: str,
    current_hash: str,
) -> bool:
    """Judge the pods by their stamps (the oldest head's, else any active pod's): restamp them
    after an operator upgrade, or delete them all for a Recreate upgrade; True for the latter."""
    reference = heads[0] if heads else (active[0] if active else None)
    if reference is None:
        return False
    annotations = reference["metadata"].get("annotations") or {}
    if annotations.get(labels.OPERATOR_VERSION_ANNOTATION) != operator_version:
        # An operator upgrade (or pods never stamped) never restarts a user's cluster:
        # record the new version and the current hash, and leave the pods running.
        plan.restamp = [str(p["metadata"]["name"]) for p in active]
        return False
    if upgrade_strategy(cluster) != RECREATE or annotations.get(labels.HASH_ANNOTATION) == current_hash:
        return False
    plan.recreating = True
    for pod in live:
        plan.delete.append(
            PodDeletion(pod, "Recreate", "the RayCluster spec changed and upgradeStrategy is Recreate")
        )
    return True


def _plan_head(
    plan: ClusterPlan, ctx: PodContext, caps: AdmittedCaps | None, heads: Sequence[Mapping[str, Any]]
) -> None:
    """One head pod: create it when none is left (if allowed), delete any beyond the oldest."""
    cluster = ctx.cluster
    head_misses = caps_module.template_misses(caps, None, cluster["spec"]["headGroupSpec"]["template"])
    if head_misses:
        plan.waiting.append(f"the head template lacks the admitted {', '.join(head_misses)}")
    if not heads and _head_restart_disabled(cluster):
        plan.waiting.append(
            f"the head pod is gone and {labels.DISABLE_PROVISIONED_HEAD_RESTART} forbids a new one"
        )
    elif not heads and (caps is None or caps.head) and not head_misses:
        plan.create.append(build_head_pod(ctx))
    for extra in heads[1:]:
        plan.delete.append(PodDeletion(extra, "SurplusHead", "more than one head pod"))


def _plan_worker_groups(
    plan: ClusterPlan, ctx: PodContext, caps: AdmittedCaps | None, workers: Sequence[Mapping[str, Any]]
) -> None:
    """Delete workers of groups no longer in the spec, then bring each group to its count."""
    groups = worker_groups(ctx.cluster)
    group_names = {labels.label_value(str(g.get("groupName"))) for g in groups}
    for pod in workers:
        if group_of(pod) not in group_names:
            plan.delete.append(PodDeletion(pod, "GroupRemoved", f"worker group {group_of(pod)!r} is gone"))

    for group in groups:
        name = str(group["groupName"])
        group_pods = [p for p in workers if group_of(p) == labels.label_value(name)]
        # The list stays as written (as in KubeRay): clearing it is a spec write GitOps sees as drift.
        to_delete = set((group.get("scaleStrategy") or {}).get("workersToDelete") or [])
        wanted = _capped(desired_pods(group), group, caps)
        misses = caps_module.template_misses(caps, name, group.get("template") or {})
        if misses:
            plan.waiting.append(f"worker group {name!r}: its template lacks the admitted {', '.join(misses)}")
        creating_from = len(plan.create)
        if int(group.get("numOfHosts") or 1) > 1:
            _plan_multi_host_group(plan, ctx, group, group_pods, to_delete, wanted)
        else:
            _plan_single_host_group(plan, ctx, group, group_pods, to_delete, wanted)
        if misses:
            del plan.create[creating_from:]  # its pods would never find a node they may use


def _hold_to_admitted(
    plan: ClusterPlan, caps: AdmittedCaps | None, pods: Sequence[Mapping[str, Any]]
) -> None:
    """Under quota: pin new pods to their admitted topology domains and keep back those the
    admitted budget has no room for yet (saying why in ``plan.waiting``)."""
    if caps is None:
        return
    if caps.head_domains is not None or caps.worker_domains:
        # Topology-aware admission: every new pod is pinned to a domain of its group's
        # assignment; a pod with no room left in its domains is not created.
        plan.create, _ = topology_pins.pin_created(plan.create, caps.head_domains, caps.worker_domains, pods)
    plan.create, waiting = caps_module.within_budget(plan.create, caps_module.Budget.of(caps, pods))
    plan.waiting += waiting


def _replace_misplaced(
    plan: ClusterPlan, caps: AdmittedCaps | None, pod: Mapping[str, Any], group_names: Sequence[str]
) -> bool:
    """Plan the deletion of a live pod that lacks its admitted placement; True if it is one."""
    misses = caps_module.misplaced(caps, pod, group_names)
    if misses:
        message = f"the pod lacks the admitted {', '.join(misses)}; it will be replaced"
        plan.delete.append(PodDeletion(pod, "Misplaced", message))
    return bool(misses)


def _plan_single_host_group(
    plan: ClusterPlan,
    ctx: PodContext,
    group: Mapping[str, Any],
    group_pods: Sequence[Mapping[str, Any]],
    to_delete: set[str],
    wanted: int,
) -> None:
    name = str(group["groupName"])
    remaining = []
    for pod in group_pods:
        if pod["metadata"]["name"] in to_delete:
            plan.delete.append(PodDeletion(pod, "WorkersToDelete", "listed in scaleStrategy.workersToDelete"))
        else:
            remaining.append(pod)
    missing = wanted - len(remaining)
    # Each new pod takes the lowest replica index its group does not use (KubeRay's labels).
    for index in labels.free_replica_indices(labels.replica_indices_in_use(remaining), missing):
        plan.create.append(build_worker_pod(ctx, group, replica_index=index))
    if missing < 0:
        # Remove the least useful first: pods not ready, then the newest.
        surplus = sorted(remaining, key=_age_key, reverse=True)
        surplus.sort(key=is_ready)
        for pod in surplus[:-missing]:
            plan.delete.append(PodDeletion(pod, "ScaleDown", f"group {name!r} has more pods than desired"))


def _capped(desired: int, group: Mapping[str, Any], caps: AdmittedCaps | None) -> int:
    """The pods a group may have: its desired count, bounded by the admitted cap (whole replicas
    only when a replica spans several hosts)."""
    if caps is None:
        return desired
    hosts = int(group.get("numOfHosts") or 1)
    cap = caps.worker_cap(str(group["groupName"]))
    return min(desired, cap - cap % hosts)


def _plan_multi_host_group(
    plan: ClusterPlan,
    ctx: PodContext,
    group: Mapping[str, Any],
    group_pods: Sequence[Mapping[str, Any]],
    to_delete: set[str],
    wanted_pods: int,
) -> None:
    """numOfHosts > 1: a replica is a set of pods sharing a replica name, created and removed
    whole. A replica that lost a host, or has a host in workersToDelete, is removed entirely."""
    name = str(group["groupName"])
    hosts = int(group.get("numOfHosts") or 1)
    replicas: dict[str, list[Mapping[str, Any]]] = {}
    for pod in group_pods:
        replica = (pod["metadata"].get("labels") or {}).get(labels.RAY_WORKER_REPLICA_NAME)
        replicas.setdefault(str(replica or pod["metadata"]["name"]), []).append(pod)
    complete: list[list[Mapping[str, Any]]] = []
    for replica_pods in replicas.values():
        if any(p["metadata"]["name"] in to_delete for p in replica_pods):
            reason, message = "WorkersToDelete", "a host of this replica is in scaleStrategy.workersToDelete"
        elif len(replica_pods) != hosts:
            reason, message = "IncompleteReplica", f"replica has {len(replica_pods)} of {hosts} hosts"
        else:
            complete.append(replica_pods)
            continue
        plan.delete.extend(PodDeletion(p, reason, message) for p in replica_pods)
    wanted = wanted_pods // hosts
    used = labels.replica_indices_in_use(p for replica_pods in complete for p in replica_pods)
    for index in labels.free_replica_indices(used, wanted - len(complete)):
        replica_name = labels.replica_name(name)
        for host_index in range(hosts):
            plan.create.append(
                build_worker_pod(ctx, group, replica=(replica_name, host_index), replica_index=index)
            )
    if len(complete) > wanted:
        # Remove replicas that are not fully ready first, then the newest.
        complete.sort(key=lambda pods: max(_age_key(p) for p in pods), reverse=True)
        complete.sort(key=lambda pods: all(is_ready(p) for p in pods))
        for replica_pods in complete[: len(complete) - wanted]:
            plan.delete.extend(
                PodDeletion(p, "ScaleDown", f"group {name!r} has more replicas than desired")
                for p in replica_pods
            )
