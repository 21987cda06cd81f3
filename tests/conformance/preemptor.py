"""Cases that ask the preemptor directly, with the flavor assignment the case gives.

Kueue's preemption tests (``pkg/scheduler/preemption/*_test.go``) do not run a scheduling
cycle: they hand the preemptor a workload, its flavor assignment and which flavor-resources are
assigned in mode Preempt, and compare the targets it returns. A case with ``assignment`` does
the same through :func:`rayquota.queueing.preemption.find_victims`, so its facts carry over
as they are instead of depending on rayquota's flavor assignment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.queueing import Engine
from rayquota.queueing.model import FlavorResource
from rayquota.queueing.preemption.victims import find_victims

from .cases import Case, CaseFormatError


def _usage(
    engine: Engine, key: str, assignment: Mapping[str, Any]
) -> tuple[dict[FlavorResource, int], set[FlavorResource]]:
    status = engine.workload(key)
    if status is None:
        raise CaseFormatError(f"assignment: no pending workload {key}")
    flavors: Mapping[str, Any] = assignment.get("flavors") or {}
    per_pod_set = bool(flavors) and all(isinstance(v, dict) for v in flavors.values())
    preempt = {str(r) for r in assignment.get("preempt") or ()}
    usage: dict[FlavorResource, int] = {}
    short: set[FlavorResource] = set()
    for pod_set in engine._workloads[key].spec.pod_sets:
        chosen = flavors.get(pod_set.name, {}) if per_pod_set else flavors
        for resource, amount in pod_set.totals().items():
            if resource not in chosen:
                raise CaseFormatError(f"assignment: no flavor for {resource} of pod set {pod_set.name}")
            fr = (str(chosen[resource]), resource)
            usage[fr] = usage.get(fr, 0) + amount
            if resource in preempt:
                short.add(fr)
    return usage, short


def preemption_targets(engine: Engine, case: Case) -> dict[str, str]:
    """Victim -> reason the preemptor gives for the case's one pending workload."""
    if len(case.pending) != 1 or case.assignment is None:
        raise CaseFormatError(f"{case.cite}: an assignment case has exactly one pending workload")
    key = str(case.pending[0]["key"])
    usage, short = _usage(engine, key, case.assignment)
    accounting = engine._accounting
    preemptor = engine._workloads[key]
    queue = accounting.queues[str(preemptor.cluster_queue)]
    victims = find_victims(
        preemptor,
        queue,
        usage,
        accounting.members_of(queue),
        accounting.queues.__getitem__,
        engine._cycle + 1,
        case.fair_sharing,
        short=short,
    )
    if victims is None:
        return {}
    return {v.key: victims.kinds[v.key].value for v in victims.workloads}
