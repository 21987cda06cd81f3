"""What a RayCluster under quota may create, and which of its pods must go: pure functions over
its admitted caps (:class:`~rayquota.operator.ray.raycluster.admitted_caps.AdmittedCaps`), its
templates and its pods.

- A pod is created only from a template that carries the admitted placement (the flavor's
  nodeSelector and tolerations): a pod built before the placement reached the spec would wait
  for ever for a node it may not use.
- A live pod without the admitted placement (built before an upgrade of the operator, or by any
  other path) is replaced, never left Pending.
- The requests of the cluster's pods that hold resources, terminating ones included, never go
  beyond the admitted budget: a new pod waits until it fits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rayquota.operator.ray.builders.pod_resources import held_by, pod_requests
from rayquota.operator.ray.raycluster.admitted_caps import AdmittedCaps
from rayquota.operator.ray.vocabulary import labels


def _group_of(pod: Mapping[str, Any]) -> str | None:
    """None for the head, else the worker group's label value."""
    pod_labels = pod["metadata"].get("labels") or {}
    if pod_labels.get(labels.RAY_NODE_TYPE) == labels.HEAD_NODE:
        return None
    return str(pod_labels.get(labels.RAY_GROUP, ""))


def template_misses(caps: AdmittedCaps | None, group: str | None, template: Mapping[str, Any]) -> list[str]:
    """What a group's pod template (``group`` None: the head's) lacks of the admitted placement."""
    if caps is None:
        return []
    return caps.placement_of(group).missing_from(template.get("spec") or {})


def misplaced(caps: AdmittedCaps | None, pod: Mapping[str, Any], group_names: Sequence[str]) -> list[str]:
    """What a live pod lacks of the placement admitted for its group (``group_names``: the
    cluster's worker groups, whose label values name the pods' groups)."""
    if caps is None:
        return []
    label = _group_of(pod)
    group = None if label is None else next((g for g in group_names if labels.label_value(g) == label), label)
    return caps.placement_of(group).missing_from(pod.get("spec") or {})


@dataclass
class Budget:
    """The resources a cluster's pods may request together, and what its pods hold already."""

    limit: Mapping[str, int] | None
    held: dict[str, int] = field(default_factory=dict)
    # A pod spec's requests as the limit names them (AdmittedCaps.requests_of).
    requests_of: Callable[[Mapping[str, Any]], dict[str, int]] = pod_requests

    @classmethod
    def of(cls, caps: AdmittedCaps | None, pods: Sequence[Mapping[str, Any]]) -> Budget:
        if caps is None:
            return cls(None, held_by(pods))
        return cls(caps.budget, held_by(pods, caps.requests_of), caps.requests_of)

    def short_of(self, requests: Mapping[str, int]) -> list[str]:
        """The resources ``requests`` would take beyond the budget (none: it fits)."""
        if self.limit is None:
            return []
        return [r for r, q in requests.items() if q and self.held.get(r, 0) + q > self.limit.get(r, 0)]

    def take(self, requests: Mapping[str, int]) -> None:
        for resource, amount in requests.items():
            self.held[resource] = self.held.get(resource, 0) + amount


def within_budget(
    creations: Sequence[dict[str, Any]], budget: Budget
) -> tuple[list[dict[str, Any]], list[str]]:
    """The planned pods that fit, in plan order (a multi-host replica fits whole or not at
    all), and why the others wait."""
    units: list[list[dict[str, Any]]] = []
    by_replica: dict[str, list[dict[str, Any]]] = {}
    for pod in creations:
        replica = (pod["metadata"].get("labels") or {}).get(labels.RAY_WORKER_REPLICA_NAME)
        if replica is None:
            units.append([pod])
        elif replica in by_replica:
            by_replica[replica].append(pod)
        else:
            by_replica[replica] = [pod]
            units.append(by_replica[replica])
    kept: list[dict[str, Any]] = []
    waiting: list[str] = []
    for unit in units:
        requests: dict[str, int] = {}
        for pod in unit:
            for resource, amount in budget.requests_of(pod["spec"]).items():
                requests[resource] = requests.get(resource, 0) + amount
        short = budget.short_of(requests)
        if short:
            group = _group_of(unit[0])
            what = "the head" if group is None else f"a pod of worker group {group!r}"
            reason = f"{what} waits: its {', '.join(sorted(short))} would exceed the admitted quota"
            if reason not in waiting:
                waiting.append(reason)
            continue
        budget.take(requests)
        kept.extend(unit)
    return kept, waiting
