"""The status KubeRay reports for a RayCluster, computed from its live pods (pure)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from rayquota.operator.core.gate import QueueCondition
from rayquota.operator.ray.builders import services
from rayquota.operator.ray.raycluster.plan import (
    HEAD_POD_READY,
    PROVISIONED,
    REPLICA_FAILURE,
    SUSPENDED,
    SUSPENDING,
    ClusterPlan,
    desired_pods,
    group_bounds,
    is_active,
    is_ready,
    is_running,
    node_type,
    worker_groups,
)
from rayquota.operator.ray.vocabulary import conditions, labels


def _format_cpu(value: Decimal) -> str:
    return str(int(value)) if value == value.to_integral_value() else f"{int(value * 1000)}m"


def _format_memory(value: Decimal) -> str:
    amount = int(value)
    for suffix, size in (("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if amount and amount % size == 0:
            return f"{amount // size}{suffix}"
    return str(amount)


TPU_RESOURCE = "google.com/tpu"


def _quantity(value: Any) -> Decimal:
    """A quantity for the status columns; one that cannot be read or counted is 0 (the pods it
    would make are refused by the API server, and that failure is reported)."""
    try:
        amount = Decimal(parse_quantity(str(value)))  # type: ignore[no-untyped-call]
    except (ValueError, ArithmeticError):
        return Decimal(0)
    # Beyond 10^64 (what the queue refuses to count too) sums would overflow: not a real amount.
    return amount if amount.is_finite() and amount.adjusted() <= 64 else Decimal(0)


def pod_resource_totals(template: Mapping[str, Any]) -> dict[str, Decimal]:
    """cpu, memory, gpu and tpu of one pod template, summed over its containers; each container
    counts its request of a resource, else its limit (KubeRay's rule for the status columns)."""
    totals = {"cpu": Decimal(0), "memory": Decimal(0), "gpu": Decimal(0), "tpu": Decimal(0)}
    for container in (template.get("spec") or {}).get("containers", []):
        resources = container.get("resources") or {}
        amounts = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in amounts.items():
            if name in ("cpu", "memory"):
                totals[name] += _quantity(value)
            elif name.endswith("gpu"):
                totals["gpu"] += _quantity(value)
            elif name == TPU_RESOURCE:
                totals["tpu"] += _quantity(value)
    return totals


def desired_resources(cluster: Mapping[str, Any]) -> dict[str, Decimal]:
    """What the CPUS/MEMORY/GPUS/TPUS columns show: the head plus replicas x numOfHosts of every
    worker group that is not suspended. Like KubeRay, a suspended cluster still shows what it
    asks for, and `replicas` is taken as written."""
    spec = cluster.get("spec") or {}
    totals = pod_resource_totals((spec.get("headGroupSpec") or {}).get("template") or {})
    for group in worker_groups(cluster):
        if group.get("suspend"):
            continue
        count = int(group.get("replicas") or 0) * int(group.get("numOfHosts") or 1)
        group_totals = pod_resource_totals(group.get("template") or {})
        for key in totals:
            totals[key] += group_totals[key] * count
    return totals


def _suspend_conditions(conds: list[dict[str, Any]], plan: ClusterPlan, now: str) -> list[dict[str, Any]]:
    """RayClusterSuspending and RayClusterSuspended are always present, False when not (as KubeRay
    reports them, so `kubectl wait --for=condition=RayClusterSuspended=false` works)."""
    for condition_type, active in ((SUSPENDING, plan.suspending), (SUSPENDED, plan.suspended)):
        conds = conditions.set_condition(conds, condition_type, active, condition_type, "", now=now)
    return conds


def _omit_zero_counts(status: dict[str, Any]) -> None:
    # KubeRay writes these with omitempty: a zero count is absent, not 0.
    for key in COUNT_FIELDS:
        if not status.get(key):
            status.pop(key, None)


COUNT_FIELDS = (
    "readyWorkerReplicas",
    "availableWorkerReplicas",
    "desiredWorkerReplicas",
    "minWorkerReplicas",
    "maxWorkerReplicas",
    "observedGeneration",
)


def cluster_status(
    cluster: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    head_service: Mapping[str, Any] | None,
    plan: ClusterPlan,
    failures: Sequence[str],
    now: str,
    queue: QueueCondition | None = None,
) -> dict[str, Any]:
    """The status to write, without lastUpdateTime (added only when something changed).
    ``queue``: the queue's verdict on a queued cluster, carried as its QuotaReserved condition."""
    previous = copy.deepcopy(cluster.get("status") or {})
    generation = cluster["metadata"].get("generation")
    conds: list[dict[str, Any]] = list(previous.get("conditions") or [])
    groups = worker_groups(cluster)
    active = [p for p in pods if is_active(p)]
    workers = [p for p in active if node_type(p) == labels.WORKER_NODE]
    heads = [p for p in active if node_type(p) == labels.HEAD_NODE]
    head = heads[0] if heads else None
    suspended_flag = bool((cluster.get("spec") or {}).get("suspend"))
    desired_workers = sum(desired_pods(g, suspended_flag) for g in groups)
    ready_workers = sum(1 for p in workers if is_ready(p))

    status = _worker_counts(groups, workers, ready_workers, generation)
    status.update(_resource_columns(cluster))
    status.update(_head_fields(cluster, head, head_service))

    head_ready = head is not None and is_ready(head)
    conds = _head_pod_ready_condition(conds, head, head_ready, now, generation)
    all_ready = head_ready and ready_workers == desired_workers and len(workers) == desired_workers
    conds = _provisioned_condition(conds, plan, all_ready, now, generation)
    status["reason"] = "; ".join(plan.errors) if plan.errors else None
    conds = _replica_failure_condition(conds, plan, failures, now, generation)
    conds = _suspend_conditions(conds, plan, now)

    status["state"] = _state(previous.get("state"), conds, plan, all_ready)
    # Like KubeRay: when the cluster last entered each state (kept across reconciles).
    transitions = dict(previous.get("stateTransitionTimes") or {})
    if status["state"] and previous.get("state") != status["state"]:
        transitions[status["state"]] = now
    if transitions:
        status["stateTransitionTimes"] = transitions
    conds = conditions.with_queue_condition(conds, queue, now=now)
    status["conditions"] = conds
    return status


def _worker_counts(
    groups: Sequence[Mapping[str, Any]],
    workers: Sequence[Mapping[str, Any]],
    ready_workers: int,
    generation: Any,
) -> dict[str, Any]:
    """The worker replica counts and observedGeneration, a zero count omitted."""
    # KubeRay reports the spec's worker count even while the cluster is suspended (suspended
    # groups count 0), and min/max only over groups that are not suspended.
    running_groups = [g for g in groups if not g.get("suspend")]
    status: dict[str, Any] = {
        "readyWorkerReplicas": ready_workers,
        "availableWorkerReplicas": sum(1 for p in workers if is_running(p)),
        "desiredWorkerReplicas": sum(desired_pods(g) for g in groups),
        "minWorkerReplicas": sum(group_bounds(g)[1] * int(g.get("numOfHosts") or 1) for g in running_groups),
        "maxWorkerReplicas": min(
            sum(group_bounds(g)[2] * int(g.get("numOfHosts") or 1) for g in running_groups), 2**31 - 1
        ),
        "observedGeneration": generation,
    }
    _omit_zero_counts(status)
    return status


def _resource_columns(cluster: Mapping[str, Any]) -> dict[str, str]:
    """desiredCPU, desiredMemory, desiredGPU and desiredTPU as the status columns show them."""
    resources = desired_resources(cluster)
    return {
        "desiredCPU": _format_cpu(resources["cpu"]),
        "desiredMemory": _format_memory(resources["memory"]),
        "desiredGPU": _format_cpu(resources["gpu"]),
        "desiredTPU": _format_cpu(resources["tpu"]),
    }


def _head_fields(
    cluster: Mapping[str, Any], head: Mapping[str, Any] | None, head_service: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``head`` (service name, pod name and IP, service IP) and, with a head service, ``endpoints``."""
    fields: dict[str, Any] = {}
    head_info: dict[str, Any] = {"serviceName": labels.cluster_head_service_name(cluster)}
    if head is not None:
        head_info["podName"] = head["metadata"]["name"]
        if (head.get("status") or {}).get("podIP"):
            head_info["podIP"] = head["status"]["podIP"]
    if head_service is not None:
        service_ip = services.head_service_ip(head_service, head)
        if service_ip:
            head_info["serviceIP"] = service_ip
        fields["endpoints"] = services.head_service_endpoints(head_service)
    fields["head"] = head_info
    return fields


def _head_pod_ready_condition(
    conds: list[dict[str, Any]], head: Mapping[str, Any] | None, head_ready: bool, now: str, generation: Any
) -> list[dict[str, Any]]:
    if head_ready:
        return conditions.set_condition(
            conds, HEAD_POD_READY, True, "HeadPodRunningAndReady", "", now=now, observed_generation=generation
        )
    reason, message = ("HeadPodNotFound", "no head pod") if head is None else ("HeadPodNotReady", "")
    return conditions.set_condition(
        conds, HEAD_POD_READY, False, reason, message, now=now, observed_generation=generation
    )


def _provisioned_condition(
    conds: list[dict[str, Any]], plan: ClusterPlan, all_ready: bool, now: str, generation: Any
) -> list[dict[str, Any]]:
    """RayClusterProvisioned: False while pods are removed; once True it stays True (KubeRay)."""
    if plan.suspended or plan.suspending or plan.recreating:
        # Suspended means no pod is left (KubeRay says so too): only pods that exist are removed.
        message = "pods are being removed"
        if plan.suspended:
            message = "the RayCluster is suspended: it has no pods"
        return conditions.set_condition(
            conds,
            PROVISIONED,
            False,
            "RayClusterPodsProvisioning",
            message,
            now=now,
            observed_generation=generation,
        )
    if conditions.is_true(conds, PROVISIONED):
        return conds
    if all_ready and not plan.changes_pods:
        return conditions.set_condition(
            conds,
            PROVISIONED,
            True,
            "AllPodRunningAndReadyFirstTime",
            "all Ray pods are running and ready",
            now=now,
            observed_generation=generation,
        )
    return conditions.set_condition(
        conds,
        PROVISIONED,
        False,
        "RayClusterPodsProvisioning",
        "; ".join(plan.waiting) or "waiting for all Ray pods to be running and ready",
        now=now,
        observed_generation=generation,
    )


def _replica_failure_condition(
    conds: list[dict[str, Any]], plan: ClusterPlan, failures: Sequence[str], now: str, generation: Any
) -> list[dict[str, Any]]:
    """ReplicaFailure: the validation errors, else the failed pod writes, else absent."""
    if plan.errors:
        reason, message = "ValidationFailed", "; ".join(plan.errors)
    elif failures:
        reason = "FailedCreatePod" if any("create" in f for f in failures) else "FailedDeletePod"
        message = "; ".join(failures)[:2000]
    else:
        return conditions.remove_condition(conds, REPLICA_FAILURE)
    return conditions.set_condition(
        conds, REPLICA_FAILURE, True, reason, message, now=now, observed_generation=generation
    )


def _state(
    previous_state: Any, conds: list[dict[str, Any]], plan: ClusterPlan, all_ready: bool
) -> str | None:
    if plan.suspended:
        return "suspended"
    if all_ready and not plan.errors and not plan.changes_pods:
        return "ready"
    if previous_state == "ready" and conditions.is_true(conds, PROVISIONED) and not plan.errors:
        # Like KubeRay: a provisioned cluster stays ready while pods come and go (scaling).
        return "ready"
    return None


def status_changed(previous: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    previous = previous or {}
    for key in set(previous) | set(new):
        if key == "lastUpdateTime":
            continue
        # A key that is absent and one that is null mean the same; a count dropping to zero
        # (and so omitted) is a change.
        if previous.get(key) != new.get(key):
            return True
    return False


def workers_caught_up(previous: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """The available workers just reached the desired count (a scale-up done, every worker
    running): what a user watching ``AVAILABLE WORKERS`` waits for, so it is written at once
    rather than coalesced with the progress before it."""
    available = int(new.get("availableWorkerReplicas") or 0)
    was = int((previous or {}).get("availableWorkerReplicas") or 0)
    return available != was and available == int(new.get("desiredWorkerReplicas") or 0)


def status_settled(new: Mapping[str, Any]) -> bool:
    """Nothing in this status is still on its way: the cluster is ready, its head pod is ready
    and every desired worker is ready and running. The last status of a change (a head pod
    replaced, workers deleted, a scale clamped) is such a status; it is written at once, as
    KubeRay writes it, instead of waiting out the coalescing window that an earlier write of the
    same change opened (that wait was the ~6 s settle time)."""
    desired = int(new.get("desiredWorkerReplicas") or 0)
    counts = (int(new.get("readyWorkerReplicas") or 0), int(new.get("availableWorkerReplicas") or 0))
    head_ready = conditions.is_true(list(new.get("conditions") or []), HEAD_POD_READY)
    return new.get("state") == "ready" and head_ready and counts == (desired, desired)
