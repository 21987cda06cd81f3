"""The status KubeRay reports for a RayCluster, computed from its live pods (pure)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from rayquota.operator.core.gate import QueueCondition
from rayquota.operator.ray import conditions, labels
from rayquota.operator.ray.podspec import pod_resource_totals
from rayquota.operator.ray.raycluster_plan import (
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


def _format_cpu(value: Decimal) -> str:
    return str(int(value)) if value == value.to_integral_value() else f"{int(value * 1000)}m"


def _format_memory(value: Decimal) -> str:
    amount = int(value)
    for suffix, size in (("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if amount and amount % size == 0:
            return f"{amount // size}{suffix}"
    return str(amount)


def desired_resources(cluster: Mapping[str, Any]) -> dict[str, Decimal]:
    spec = cluster.get("spec") or {}
    suspended = bool(spec.get("suspend"))
    totals = {"cpu": Decimal(0), "memory": Decimal(0), "gpu": Decimal(0)}
    if suspended:
        return totals
    head_totals = pod_resource_totals((spec.get("headGroupSpec") or {}).get("template") or {})
    for key in totals:
        totals[key] += head_totals[key]
    for group in worker_groups(cluster):
        count = desired_pods(group)
        group_totals = pod_resource_totals(group.get("template") or {})
        for key in totals:
            totals[key] += group_totals[key] * count
    return totals


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
    spec = cluster.get("spec") or {}
    suspended_flag = bool(spec.get("suspend"))
    groups = worker_groups(cluster)
    active = [p for p in pods if is_active(p)]
    workers = [p for p in active if node_type(p) == labels.WORKER_NODE]
    heads = [p for p in active if node_type(p) == labels.HEAD_NODE]
    head = heads[0] if heads else None
    desired_workers = sum(desired_pods(g, suspended_flag) for g in groups)
    ready_workers = sum(1 for p in workers if is_ready(p))

    status: dict[str, Any] = {
        "readyWorkerReplicas": ready_workers,
        "availableWorkerReplicas": sum(1 for p in workers if is_running(p)),
        "desiredWorkerReplicas": desired_workers,
        "minWorkerReplicas": sum(group_bounds(g)[1] * int(g.get("numOfHosts") or 1) for g in groups),
        "maxWorkerReplicas": sum(group_bounds(g)[2] * int(g.get("numOfHosts") or 1) for g in groups),
        "observedGeneration": generation,
    }
    resources = desired_resources(cluster)
    status["desiredCPU"] = _format_cpu(resources["cpu"])
    status["desiredMemory"] = _format_memory(resources["memory"])
    status["desiredGPU"] = _format_cpu(resources["gpu"])
    status["desiredTPU"] = "0"

    head_info: dict[str, Any] = {"serviceName": labels.head_service_name(cluster["metadata"]["name"])}
    if head is not None:
        head_info["podName"] = head["metadata"]["name"]
        if (head.get("status") or {}).get("podIP"):
            head_info["podIP"] = head["status"]["podIP"]
    if head_service is not None:
        cluster_ip = (head_service.get("spec") or {}).get("clusterIP")
        if cluster_ip and cluster_ip != "None":
            head_info["serviceIP"] = cluster_ip
        status["endpoints"] = {
            str(p["name"]): str(p["port"]) for p in (head_service.get("spec") or {}).get("ports", [])
        }
    status["head"] = head_info

    head_ready = head is not None and is_ready(head)
    if head_ready:
        conds = conditions.set_condition(
            conds, HEAD_POD_READY, True, "HeadPodRunningAndReady", "", now=now, observed_generation=generation
        )
    else:
        reason, message = ("HeadPodNotFound", "no head pod") if head is None else ("HeadPodNotReady", "")
        conds = conditions.set_condition(
            conds, HEAD_POD_READY, False, reason, message, now=now, observed_generation=generation
        )

    all_ready = head_ready and ready_workers == desired_workers and len(workers) == desired_workers
    if plan.suspended or plan.suspending or plan.recreating:
        conds = conditions.set_condition(
            conds,
            PROVISIONED,
            False,
            "RayClusterPodsProvisioning",
            "pods are being removed",
            now=now,
            observed_generation=generation,
        )
    elif all_ready and not plan.changes_pods:
        if not conditions.is_true(conds, PROVISIONED):
            conds = conditions.set_condition(
                conds,
                PROVISIONED,
                True,
                "AllPodRunningAndReadyFirstTime",
                "all Ray pods are running and ready",
                now=now,
                observed_generation=generation,
            )
    elif not conditions.is_true(conds, PROVISIONED):
        conds = conditions.set_condition(
            conds,
            PROVISIONED,
            False,
            "RayClusterPodsProvisioning",
            "waiting for all Ray pods to be running and ready",
            now=now,
            observed_generation=generation,
        )

    if plan.errors:
        status["reason"] = "; ".join(plan.errors)
        conds = conditions.set_condition(
            conds,
            REPLICA_FAILURE,
            True,
            "ValidationFailed",
            status["reason"],
            now=now,
            observed_generation=generation,
        )
    elif failures:
        status["reason"] = None
        conds = conditions.set_condition(
            conds,
            REPLICA_FAILURE,
            True,
            "FailedCreatePod" if any("create" in f for f in failures) else "FailedDeletePod",
            "; ".join(failures)[:2000],
            now=now,
            observed_generation=generation,
        )
    else:
        status["reason"] = None
        conds = conditions.remove_condition(conds, REPLICA_FAILURE)

    if plan.suspending:
        conds = conditions.set_condition(
            conds, SUSPENDING, True, "RayClusterSuspending", "deleting all pods", now=now
        )
        conds = conditions.remove_condition(conds, SUSPENDED)
    elif plan.suspended:
        conds = conditions.remove_condition(conds, SUSPENDING)
        conds = conditions.set_condition(
            conds, SUSPENDED, True, "RayClusterSuspended", "all pods are deleted", now=now
        )
    else:
        conds = conditions.remove_condition(conds, SUSPENDING)
        if conditions.find(conds, SUSPENDED) is not None:
            conds = conditions.set_condition(conds, SUSPENDED, False, "RayClusterResumed", "", now=now)

    if plan.suspended:
        status["state"] = "suspended"
    elif all_ready and not plan.errors and not plan.changes_pods:
        status["state"] = "ready"
    elif previous.get("state") == "ready" and conditions.is_true(conds, PROVISIONED) and not plan.errors:
        # Like KubeRay: a provisioned cluster stays ready while pods come and go (scaling).
        status["state"] = "ready"
    else:
        status["state"] = None
    # Like KubeRay: when the cluster last entered each state (kept across reconciles).
    transitions = dict(previous.get("stateTransitionTimes") or {})
    if status["state"] and previous.get("state") != status["state"]:
        transitions[status["state"]] = now
    if transitions:
        status["stateTransitionTimes"] = transitions
    conds = conditions.with_queue_condition(conds, queue, now=now)
    status["conditions"] = conds
    return status


def status_changed(previous: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    previous = previous or {}
    for key, value in new.items():
        if key == "lastUpdateTime":
            continue
        if previous.get(key) != value and not (value is None and key not in previous):
            return True
    return False
