"""What one RayCluster under quota control may run: the port through which the queue caps the
RayCluster planner (the queue's gate implements it; without a queue nothing is capped)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from rayquota.operator.core.gate import ANYWHERE, Placement
from rayquota.operator.ray.builders.pod_resources import pod_requests


@dataclass(frozen=True)
class AdmittedCaps:
    """What one RayCluster under quota control may run."""

    head: bool  # may the head pod exist
    workers: Mapping[str, int] = field(default_factory=dict)  # worker group -> most pods
    # Where the pods must run: the head's placement, and each worker group's.
    head_placement: Placement = ANYWHERE
    worker_placements: Mapping[str, Placement] = field(default_factory=dict)
    # resource -> milli-units that all the cluster's pods that hold resources (terminating ones
    # included) may request together; a resource not named may not be requested at all. None:
    # no resource bound (counts only).
    budget: Mapping[str, int] | None = None
    # Topology-aware admission: where each group's pods go, (nodeSelector, pods) per domain in
    # the assignment's order; None / absent: no assignment, pods go wherever the flavor allows.
    head_domains: tuple[tuple[Mapping[str, str], int], ...] | None = None
    worker_domains: Mapping[str, tuple[tuple[Mapping[str, str], int], ...]] = field(default_factory=dict)
    # A pod spec's requests as the budget names them (the queue maps an extended resource a
    # DeviceClass backs to its quota resource, as in its pod sets).
    requests_of: Callable[[Mapping[str, Any]], dict[str, int]] = field(default=pod_requests, compare=False)

    def worker_cap(self, group: str) -> int:
        return int(self.workers.get(group, 0)) if self.head else 0

    def placement_of(self, group: str | None) -> Placement:
        """``group`` None: the head."""
        return self.head_placement if group is None else self.worker_placements.get(group, ANYWHERE)


class ClusterCaps(Protocol):
    def caps_for(self, cluster: Mapping[str, Any]) -> AdmittedCaps | None:
        """None when the cluster is not under quota control."""
        ...


class Uncapped:
    def caps_for(self, cluster: Mapping[str, Any]) -> AdmittedCaps | None:
        return None
