"""RayService decisions, as plain values: what a spec change triggers and what the clusters do next.

A RayService owns up to two RayClusters: the *active* one (serving) and the *pending* one (being
prepared by an upgrade). Their names live in the status; everything here reads the service, the
two clusters and the Serve verdicts and returns what to do, never doing it.

What a change of ``rayClusterConfig`` triggers, compared with a cluster's recorded config hash
(the hash leaves out worker counts, the nested ``suspend`` gate and the queue's placement):

- nothing, or worker counts only: the cluster is scaled in place;
- worker groups appended at the end: the cluster is updated in place;
- anything else: a new cluster is prepared (NewCluster, NewClusterWithIncrementalUpgrade) or the
  change is only reported (None).

An operator upgrade never creates a new cluster: a cluster stamped by another operator version is
compared by its live spec with today's hash, and only re-stamped when that matches.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from rayquota.api.ray_v1 import RayServiceUpgradeType
from rayquota.operator.ray.builders.hashing import spec_hash
from rayquota.operator.ray.vocabulary import labels

DEFAULT_DELETION_DELAY_S = 60
WORKER_COUNT_FIELDS = ("replicas", "minReplicas", "maxReplicas")


class ClusterChange(StrEnum):
    SAME = "Same"
    SCALE_IN_PLACE = "ScaleInPlace"
    APPEND_WORKER_GROUPS = "AppendWorkerGroups"
    RESTAMP = "Restamp"  # written by another operator version, same config
    NEW_CLUSTER = "NewCluster"

    @property
    def in_place(self) -> bool:
        return self in (
            ClusterChange.SCALE_IN_PLACE,
            ClusterChange.APPEND_WORKER_GROUPS,
            ClusterChange.RESTAMP,
        )


def cluster_config(service: Mapping[str, Any]) -> dict[str, Any]:
    return dict(service.get("spec", {}).get("rayClusterConfig") or {})


def upgrade_type(service: Mapping[str, Any]) -> RayServiceUpgradeType:
    strategy = service.get("spec", {}).get("upgradeStrategy") or {}
    return RayServiceUpgradeType(strategy.get("type") or RayServiceUpgradeType.NEW_CLUSTER)


def deletion_delay_s(service: Mapping[str, Any]) -> int:
    delay = service.get("spec", {}).get("rayClusterDeletionDelaySeconds")
    return DEFAULT_DELETION_DELAY_S if delay is None else int(delay)


def _annotations(cluster: Mapping[str, Any]) -> Mapping[str, str]:
    return cluster.get("metadata", {}).get("annotations") or {}


def recorded_hash(cluster: Mapping[str, Any], operator_version: str) -> str:
    """The config hash a child was built from. A child stamped by another operator version is
    hashed from its live spec instead: the hash function may have changed with the operator."""
    annotations = _annotations(cluster)
    if annotations.get(labels.OPERATOR_VERSION_ANNOTATION) == operator_version:
        return str(annotations.get(labels.HASH_ANNOTATION, ""))
    return spec_hash(cluster.get("spec") or {})


def _worker_counts(spec: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (str(group.get("groupName")), {key: group.get(key) for key in WORKER_COUNT_FIELDS})
        for group in spec.get("workerGroupSpecs") or []
    ]


def _without_appended_groups(goal: Mapping[str, Any], count: int) -> dict[str, Any]:
    trimmed = copy.deepcopy(dict(goal))
    trimmed["workerGroupSpecs"] = list(trimmed.get("workerGroupSpecs") or [])[:count]
    return trimmed


def classify_change(
    goal: Mapping[str, Any], cluster: Mapping[str, Any], operator_version: str
) -> ClusterChange:
    """What turning this cluster into ``goal`` (a rayClusterConfig) takes."""
    current = recorded_hash(cluster, operator_version)
    live_spec = cluster.get("spec") or {}
    if spec_hash(goal) == current:
        if _annotations(cluster).get(labels.OPERATOR_VERSION_ANNOTATION) != operator_version:
            return ClusterChange.RESTAMP
        if _worker_counts(goal) != _worker_counts(live_spec) and not live_spec.get("enableInTreeAutoscaling"):
            return ClusterChange.SCALE_IN_PLACE
        return ClusterChange.SAME
    live_groups = len(live_spec.get("workerGroupSpecs") or [])
    goal_groups = len(goal.get("workerGroupSpecs") or [])
    if goal_groups > live_groups and spec_hash(_without_appended_groups(goal, live_groups)) == current:
        return ClusterChange.APPEND_WORKER_GROUPS
    return ClusterChange.NEW_CLUSTER


# ---------------------------------------------------------------------------------------------------
# What the two clusters do next


class ClusterStep(StrEnum):
    """The one cluster-level move of a reconcile."""

    NOTHING = "Nothing"
    PREPARE_PENDING = "PreparePending"  # record a new pending cluster name (created next pass)
    CREATE_PENDING = "CreatePending"  # the recorded pending cluster does not exist: create it
    UPDATE_ACTIVE = "UpdateActive"
    UPDATE_PENDING = "UpdatePending"
    REPLACE_PENDING = "ReplacePending"  # the goal moved on: drop the pending cluster, prepare anew
    DROP_PENDING = "DropPending"  # the goal went back to the active config (NewCluster)
    START_ROLLBACK = "StartRollback"  # same, mid incremental upgrade: walk traffic back first
    CANCEL_ROLLBACK = "CancelRollback"  # the goal is the pending config again
    REPORT_UPGRADE_DISABLED = "ReportUpgradeDisabled"


@dataclass(frozen=True)
class ClusterDecision:
    step: ClusterStep
    change: ClusterChange = ClusterChange.SAME
    message: str = ""


@dataclass(frozen=True)
class ServiceView:
    """What the planner reads: the service and its two clusters as the cache holds them."""

    service: Mapping[str, Any]
    active: Mapping[str, Any] | None
    pending: Mapping[str, Any] | None
    pending_name: str  # recorded in the status (may name a cluster not created yet)
    rolling_back: bool
    operator_version: str


def decide_clusters(view: ServiceView) -> ClusterDecision:
    goal = cluster_config(view.service)
    strategy = upgrade_type(view.service)
    incremental = strategy == RayServiceUpgradeType.NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE
    if view.pending_name and view.pending is None:
        return ClusterDecision(ClusterStep.CREATE_PENDING, message=f"creating RayCluster {view.pending_name}")
    if view.active is None and view.pending is None:
        return ClusterDecision(ClusterStep.PREPARE_PENDING, ClusterChange.NEW_CLUSTER, "no cluster yet")
    if view.pending is not None:
        return _decide_with_pending(view, goal, view.pending, incremental)
    assert view.active is not None
    change = classify_change(goal, view.active, view.operator_version)
    if change.in_place:
        return ClusterDecision(ClusterStep.UPDATE_ACTIVE, change, f"{change.value} on the active cluster")
    if change == ClusterChange.SAME:
        return ClusterDecision(ClusterStep.NOTHING)
    if strategy == RayServiceUpgradeType.NONE:
        return ClusterDecision(
            ClusterStep.REPORT_UPGRADE_DISABLED,
            change,
            "rayClusterConfig changed but upgradeStrategy.type is None: no new cluster is prepared",
        )
    return ClusterDecision(
        ClusterStep.PREPARE_PENDING, change, "rayClusterConfig changed: preparing a new cluster"
    )


def _decide_with_pending(
    view: ServiceView, goal: Mapping[str, Any], pending: Mapping[str, Any], incremental: bool
) -> ClusterDecision:
    to_pending = classify_change(goal, pending, view.operator_version)
    if to_pending != ClusterChange.NEW_CLUSTER:
        if view.rolling_back:
            return ClusterDecision(
                ClusterStep.CANCEL_ROLLBACK, to_pending, "the goal is the new cluster again"
            )
        if to_pending.in_place:
            return ClusterDecision(
                ClusterStep.UPDATE_PENDING, to_pending, f"{to_pending.value} on the pending cluster"
            )
        return ClusterDecision(ClusterStep.NOTHING)
    back_to_active = (
        view.active is not None
        and classify_change(goal, view.active, view.operator_version) != ClusterChange.NEW_CLUSTER
    )
    if incremental and view.active is not None:
        # Traffic may already be on the pending cluster: walk back before anything else, whether
        # the goal is the old config or a third one (a new upgrade starts after the rollback).
        if view.rolling_back:
            return ClusterDecision(ClusterStep.NOTHING)
        return ClusterDecision(
            ClusterStep.START_ROLLBACK, ClusterChange.NEW_CLUSTER, "rayClusterConfig changed mid-upgrade"
        )
    if back_to_active:
        return ClusterDecision(
            ClusterStep.DROP_PENDING, message="rayClusterConfig is the active cluster's again"
        )
    return ClusterDecision(
        ClusterStep.REPLACE_PENDING, ClusterChange.NEW_CLUSTER, "rayClusterConfig changed again mid-upgrade"
    )


# ---------------------------------------------------------------------------------------------------
# Leftover clusters


@dataclass(frozen=True)
class Leftover:
    """A cluster of this service that is neither active nor pending, and when it goes."""

    name: str
    delete_at: float  # seconds since the epoch


def leftovers(
    clusters: list[Mapping[str, Any]],
    *,
    active_name: str,
    pending_name: str,
    delete_after_annotation: str,
    now: float,
    delay_s: int,
) -> tuple[list[str], list[Leftover]]:
    """(names to delete now, clusters to stamp with a deletion time).

    The time is written on the cluster itself, so an operator restart neither forgets it nor
    restarts the delay."""
    due: list[str] = []
    to_stamp: list[Leftover] = []
    for cluster in clusters:
        name = str(cluster["metadata"]["name"])
        if name in (active_name, pending_name) or cluster["metadata"].get("deletionTimestamp"):
            continue
        stamped = _annotations(cluster).get(delete_after_annotation)
        if stamped is None:
            to_stamp.append(Leftover(name, now + delay_s))
            if delay_s <= 0:
                due.append(name)
        elif float(stamped) <= now:
            due.append(name)
    return due, to_stamp
