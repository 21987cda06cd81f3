"""Runs one conformance case through the engine and says where its outcome differs from upstream's.

The case's setup is built with the engine's public events (flavors, cohorts, ClusterQueues,
LocalQueues, namespace labels), its admitted workloads are restored as the operator restores
recorded admissions, its pending workloads are added, and ``cycles`` cycles run. Victims of a
cycle are released before the next (their pods are gone), as upstream's multi-cycle tests let
the evictions complete. The outcome is compared with the case's expectation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rayquota.queueing import (
    AdmissionFairSharing,
    AdmissionMode,
    Admit,
    BorrowWithinCohort,
    BorrowWithinCohortPolicy,
    ClusterQueue,
    Cohort,
    Engine,
    FlavorFungibility,
    FlavorFungibilityPreference,
    FlavorQuotas,
    LabelSelector,
    LabelSelectorRequirement,
    LocalQueue,
    NodeAffinity,
    NodeSelectorRequirement,
    Phase,
    PodSet,
    PodSetAssignment,
    Preempt,
    Preemption,
    QueueingStrategy,
    ReclaimWithinCohortPolicy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    StopPolicy,
    Taint,
    Toleration,
    WhenCanBorrow,
    WhenCanPreempt,
    WithinClusterQueuePolicy,
    Workload,
    WorkloadEviction,
    parse_quantity,
)

from .cases import Case, CaseFormatError, Raw
from .preemptor import preemption_targets

# Kueue v1beta2 spells the stopping choice MayStopSearch; rayquota's values are its older names.
_WHEN_CAN_BORROW = {"MayStopSearch": WhenCanBorrow.BORROW, **{p.value: p for p in WhenCanBorrow}}
_WHEN_CAN_PREEMPT = {"MayStopSearch": WhenCanPreempt.PREEMPT, **{p.value: p for p in WhenCanPreempt}}


@dataclass(slots=True)
class Outcome:
    admitted: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    """workload -> pod set -> resource -> flavor, for admissions the run made"""
    admitted_in: dict[str, str] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    """workload -> pod set -> admitted pod count (fewer than asked under partial admission)"""
    preempted: set[str] = field(default_factory=set)
    pending: set[str] = field(default_factory=set)
    reasons: dict[str, str] = field(default_factory=dict)
    preemption_reasons: dict[str, str] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    """Every admission of the run, in the order made."""


# ---------------------------------------------------------------- building the engine


def _quota(value: Any, where: str) -> ResourceQuota:
    if isinstance(value, list):
        if not 1 <= len(value) <= 3:
            raise CaseFormatError(
                f"{where}: quota [nominal, borrowingLimit, lendingLimit] has {len(value)} items"
            )
        nominal, borrowing, lending = [*value, None, None][:3]
        return ResourceQuota.of(str(nominal), _opt(borrowing), _opt(lending))
    return ResourceQuota.of(str(value))


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


def _groups(raw: list[Raw], where: str) -> tuple[ResourceGroup, ...]:
    groups = []
    for index, group in enumerate(raw):
        covered: list[str] = []
        flavors = []
        for flavor, resources in group.items():
            for resource in resources:
                if resource not in covered:
                    covered.append(resource)
            quotas = {
                r: _quota(q, f"{where} group {index} flavor {flavor} {r}") for r, q in resources.items()
            }
            flavors.append(FlavorQuotas(str(flavor), quotas))
        groups.append(ResourceGroup(tuple(covered), tuple(flavors)))
    return tuple(groups)


def _taint(text: str) -> Taint:
    """``key=value:Effect`` (value optional)."""
    head, _, effect = text.partition(":")
    key, _, value = head.partition("=")
    return Taint(key, value, effect or "NoSchedule")


def _toleration(raw: Raw) -> Toleration:
    return Toleration(
        str(raw.get("key", "")),
        str(raw.get("operator", "Equal")),
        str(raw.get("value", "")),
        str(raw.get("effect", "")),
    )


def _flavor(raw: Any) -> ResourceFlavor:
    if isinstance(raw, str):
        return ResourceFlavor(raw)
    return ResourceFlavor(
        str(raw["name"]),
        node_labels=dict(raw.get("labels") or {}),
        node_taints=tuple(_taint(t) for t in raw.get("taints") or ()),
        tolerations=tuple(_toleration(t) for t in raw.get("tolerations") or ()),
    )


def _selector(raw: Raw | None) -> LabelSelector | None:
    """``{key: [values]}``: every key In its values (Kueue's tests' matchExpressions);
    ``{}``: every namespace."""
    if raw is None:
        return None
    return LabelSelector(
        match_expressions=tuple(LabelSelectorRequirement(k, "In", tuple(v)) for k, v in raw.items())
    )


def _preemption(raw: Raw | None) -> Preemption:
    if not raw:
        return Preemption()
    borrow = raw.get("borrowWithinCohort") or {}
    threshold = borrow.get("maxPriorityThreshold")
    return Preemption(
        WithinClusterQueuePolicy(raw.get("withinClusterQueue", "Never")),
        ReclaimWithinCohortPolicy(raw.get("reclaimWithinCohort", "Never")),
        BorrowWithinCohort(
            BorrowWithinCohortPolicy(borrow.get("policy", "Never")),
            None if threshold is None else int(threshold),
        ),
    )


def _preference(raw: str | None) -> FlavorFungibilityPreference | None:
    return None if raw is None else FlavorFungibilityPreference(raw)


def _cluster_queue(raw: Raw) -> ClusterQueue:
    where = f"cluster queue {raw.get('name')}"
    fungibility = raw.get("fungibility") or {}
    return ClusterQueue(
        str(raw["name"]),
        _groups(list(raw.get("groups") or []), where),
        cohort=raw.get("cohort"),
        queueing_strategy=QueueingStrategy(raw.get("strategy", "BestEffortFIFO")),
        namespace_selector=_selector(raw.get("namespaces")),
        preemption=_preemption(raw.get("preemption")),
        flavor_fungibility=FlavorFungibility(
            _WHEN_CAN_BORROW[fungibility.get("whenCanBorrow", "MayStopSearch")],
            _WHEN_CAN_PREEMPT[fungibility.get("whenCanPreempt", "TryNextFlavor")],
            _preference(fungibility.get("preference")),
        ),
        stop_policy=StopPolicy(raw.get("stop", "None")),
        fair_sharing_weight=float(raw.get("weight", 1.0)),
        admission_mode=AdmissionMode(raw.get("admission_mode", "NoAdmissionFairSharing")),
    )


def _admission_fair_sharing(raw: Raw | None) -> AdmissionFairSharing | None:
    if raw is None:
        return None
    return AdmissionFairSharing(
        usage_half_life_time=float(raw.get("usageHalfLifeTime", 0)),
        resource_weights={str(r): float(w) for r, w in (raw.get("resourceWeights") or {}).items()},
    )


def _local_queue(raw: str | Raw) -> LocalQueue:
    """``"ns/name -> cq"``, or ``{key: ns/name, cq: cq, weight: 2}`` (``fairSharing.weight``)."""
    if isinstance(raw, str):
        key, _, target = (part.strip() for part in raw.partition("->"))
        namespace, _, name = key.partition("/")
        return LocalQueue(namespace, name, target)
    namespace, _, name = str(raw["key"]).partition("/")
    return LocalQueue(namespace, name, str(raw["cq"]), fair_sharing_weight=float(raw.get("weight", 1.0)))


def _pod_sets(raw: Raw) -> tuple[PodSet, ...]:
    if "pod_sets" in raw:
        specs = list(raw["pod_sets"])
    else:
        specs = [{"name": "main", "count": raw.get("count", 1), "requests": raw.get("requests") or {}}]
    return tuple(
        PodSet.of(
            str(ps.get("name", "main")),
            int(ps.get("count", 1)),
            {str(r): str(q) for r, q in (ps.get("requests") or {}).items()},
            node_selector=dict(ps.get("node_selector") or {}),
            tolerations=tuple(_toleration(t) for t in ps.get("tolerations") or ()),
            min_count=None if ps.get("min_count") is None else int(ps["min_count"]),
            node_affinity=_node_affinity(ps.get("node_affinity") or ()),
        )
        for ps in specs
    )


def _node_affinity(terms: list[list[Raw]]) -> NodeAffinity:
    """``[[{key, operator, values}, ...], ...]``: the terms (ORed) of expressions (ANDed)."""
    return tuple(
        tuple(
            NodeSelectorRequirement(
                str(e["key"]), str(e["operator"]), tuple(str(v) for v in e.get("values") or ())
            )
            for e in term
        )
        for term in terms
    )


def _workload(raw: Raw, index: int) -> Workload:
    namespace, _, name = str(raw["key"]).partition("/")
    workload = Workload(
        namespace,
        name,
        str(raw.get("queue", "main")),
        _pod_sets(raw),
        priority=int(raw.get("priority", 0)),
        created=float(raw.get("created", index)),
        replaces=raw.get("replaces"),
        evicted=_eviction(raw.get("evicted"), str(raw["key"])),
    )
    return workload.after_reclaim({str(ps): int(n) for ps, n in (raw.get("reclaimable") or {}).items()})


def _eviction(raw: Any, key: str) -> WorkloadEviction | None:
    """``evicted: {reason: PodsReadyTimeout, at: 3}``: the workload's Evicted condition (true)."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"reason", "at"}:
        raise CaseFormatError(f"{key}: evicted must be {{reason: ..., at: ...}}, got {raw!r}")
    return WorkloadEviction(str(raw["reason"]), float(raw["at"]))


def _assignments(raw: Raw, workload: Workload) -> list[PodSetAssignment]:
    flavors: Mapping[str, Any] = raw.get("flavors") or {}
    out = []
    for pod_set in workload.pod_sets:
        chosen: Mapping[str, Any] = flavors.get(pod_set.name, {}) if _per_pod_set(flavors) else flavors
        totals = pod_set.totals()
        missing = set(totals) - set(chosen)
        if missing:
            raise CaseFormatError(f"admitted {workload.key}: no flavor given for {sorted(missing)}")
        out.append(PodSetAssignment(pod_set.name, pod_set.count, {r: str(chosen[r]) for r in totals}, totals))
    return out


def _per_pod_set(flavors: Mapping[str, Any]) -> bool:
    return bool(flavors) and all(isinstance(v, dict) for v in flavors.values())


def build(case: Case) -> Engine:
    engine = Engine(
        fair_sharing=case.fair_sharing,
        admission_fair_sharing=_admission_fair_sharing(case.admission_fair_sharing),
        requeuing_timestamp=case.requeuing_timestamp,
    )
    setup = case.setup
    for name, labels in setup.namespaces.items():
        engine.upsert_namespace(name, labels)
    for flavor in setup.flavors:
        engine.upsert_flavor(_flavor(flavor))
    for cohort in setup.cohorts:
        engine.upsert_cohort(
            Cohort(
                str(cohort["name"]),
                cohort.get("parent"),
                _groups(list(cohort.get("groups") or []), f"cohort {cohort['name']}"),
                float(cohort.get("weight", 1.0)),
            )
        )
    for cq in setup.cluster_queues:
        engine.upsert_cluster_queue(_cluster_queue(cq))
    for raw_queue in setup.local_queues:
        engine.upsert_local_queue(_local_queue(raw_queue))
    for key, consumed in case.consumed.items():
        engine.restore_local_queue_usage(key, {r: parse_quantity(str(q)) for r, q in consumed.items()}, 0.0)
    for index, raw in enumerate(case.admitted):
        workload = _workload(raw, -1000 + index)
        engine.restore_admission(
            workload, str(raw["cq"]), _assignments(raw, workload), evicting=bool(raw.get("evicting"))
        )
    for index, raw in enumerate(case.pending):
        engine.add_workload(_workload(raw, index))
    return engine


# ---------------------------------------------------------------- running and comparing


def run(case: Case) -> Outcome:
    engine = build(case)
    outcome = Outcome()
    if case.assignment is not None:
        outcome.preemption_reasons = preemption_targets(engine, case)
        outcome.preempted = set(outcome.preemption_reasons)
        return outcome
    pending_keys = [str(raw["key"]) for raw in case.pending]
    for _ in range(case.cycles):
        victims: list[str] = []
        for decision in engine.run_cycle():
            if isinstance(decision, Admit):
                outcome.admitted[decision.workload] = {ps.name: dict(ps.flavors) for ps in decision.pod_sets}
                outcome.admitted_in[decision.workload] = decision.cluster_queue
                outcome.order.append(decision.workload)
                outcome.counts[decision.workload] = {ps.name: ps.count for ps in decision.pod_sets}
            elif isinstance(decision, Preempt):
                victims.extend(decision.victims)
                outcome.preemption_reasons.update({k: v.value for k, v in decision.victim_kinds.items()})
        outcome.preempted.update(victims)
        for key in victims:
            engine.release(key)
    for key in pending_keys:
        status = engine.workload(key)
        if status is not None and status.phase is Phase.PENDING:
            outcome.pending.add(key)
            outcome.reasons[key] = status.pending_reason
    return outcome


def _expected_flavors(
    expected: Mapping[str, Any], got: Mapping[str, Mapping[str, str]]
) -> dict[str, dict[str, str]]:
    if _per_pod_set(expected):
        return {ps: dict(flavors) for ps, flavors in expected.items()}
    return {ps: dict(expected) for ps in got} if got else {"main": dict(expected)}


def differences(case: Case, outcome: Outcome) -> list[str]:
    """Where the outcome differs from the case's expectation, in words (empty: it agrees)."""
    want = case.expect
    out: list[str] = []
    if want.admitted is not None:
        missing = set(want.admitted) - set(outcome.admitted)
        extra = set(outcome.admitted) - set(want.admitted)
        for key in sorted(missing):
            out.append(f"{key} not admitted (reason: {outcome.reasons.get(key, '-')})")
        for key in sorted(extra):
            out.append(f"{key} admitted, upstream keeps it waiting")
        for key in sorted(set(want.admitted) & set(outcome.admitted)):
            got = outcome.admitted[key]
            expected = _expected_flavors(want.admitted[key], got)
            if expected != got:
                out.append(f"{key} admitted on {got}, upstream on {expected}")
    if want.admitted_in is not None:
        for key, cq in sorted(want.admitted_in.items()):
            if outcome.admitted_in.get(key) != cq:
                out.append(f"{key} admitted in {outcome.admitted_in.get(key)}, upstream in {cq}")
    if want.counts is not None:
        for key, counts in sorted(want.counts.items()):
            if outcome.counts.get(key) != counts:
                out.append(f"{key} admitted with counts {outcome.counts.get(key)}, upstream {counts}")
    if want.preempted is not None and set(want.preempted) != outcome.preempted:
        out.append(f"preempted {sorted(outcome.preempted)}, upstream {sorted(want.preempted)}")
    if want.reasons is not None and want.reasons != outcome.preemption_reasons:
        out.append(f"preemption reasons {outcome.preemption_reasons}, upstream {want.reasons}")
    if want.order is not None and want.order != outcome.order:
        out.append(f"admitted in the order {outcome.order}, upstream {want.order}")
    if want.pending is not None and set(want.pending) != outcome.pending:
        out.append(f"pending {sorted(outcome.pending)}, upstream {sorted(want.pending)}")
    return out
