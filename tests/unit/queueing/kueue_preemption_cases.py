"""Kueue v0.19.2's preemption table cases as data (facts only: inputs and expected victims).

Sources: ``pkg/scheduler/preemption/preemption_test.go`` (TestPreemption) and
``preemption_hierarchical_test.go`` (TestHierarchicalPreemptions) at tag v0.19.2; each case names
its test and line. Kueue's tests call the preemptor with a given flavor assignment; so does the
runner (``test_kueue_preemption.py``), through :func:`rayquota.queueing.preemption.find_victims`.

Notation, one string per workload:

- admitted: ``"<name>@<cluster queue> [p=<priority>] <resource>:<flavor>=<amount> ... [t=<s>]
  [created=<s>] [evicted]"``; ``t`` is when quota was reserved (seconds after the case's start,
  0 by default: the same instant), ``evicted`` an eviction already under way;
- incoming: ``"<cluster queue> [p=<priority>] <resource>:<flavor>=<amount>[!] ..."``, ``!``
  marking the flavor-resources assigned in mode Preempt (the rest fit);
- ``preempted``: victim name -> Kueue's preemption reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Queue:
    name: str
    groups: tuple[dict[str, dict[str, tuple[str, str | None, str | None]]], ...] = ()
    """Resource groups: flavor -> resource -> (nominal, borrowing limit, lending limit)."""
    cohort: str | None = None
    within: str = "Never"
    reclaim: str = "Never"
    borrow: str = "Never"
    threshold: int | None = None


@dataclass(frozen=True)
class CohortNode:
    name: str
    parent: str | None = None
    groups: tuple[dict[str, dict[str, tuple[str, str | None, str | None]]], ...] = ()


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    queues: tuple[Queue, ...]
    admitted: tuple[str, ...]
    incoming: str
    preempted: dict[str, str] = field(default_factory=dict)
    cohorts: tuple[CohortNode, ...] = ()
    unsupported: str | None = None
    deliberate: str | None = None


def q(
    nominal: str, borrowing: str | None = None, lending: str | None = None
) -> tuple[str, str | None, str | None]:
    return (nominal, borrowing, lending)


LP, ANY, NEVER, LONEP = "LowerPriority", "Any", "Never", "LowerOrNewerEqualPriority"
IN_CQ, RECLAIM, WHILE_BORROWING = "InClusterQueue", "InCohortReclamation", "InCohortReclaimWhileBorrowing"

# preemption_test.go:70-281, defaultClusterQueues
DEFAULT_QUEUES = (
    Queue(
        "standalone",
        ({"default": {"cpu": q("6")}}, {"alpha": {"memory": q("3Gi")}, "beta": {"memory": q("3Gi")}}),
        within=LP,
    ),
    Queue("c1", ({"default": {"cpu": q("6", "6"), "memory": q("3Gi", "3Gi")}},), "cohort", LP, LP),
    Queue("c2", ({"default": {"cpu": q("6", "6"), "memory": q("3Gi", "3Gi")}},), "cohort", NEVER, ANY),
    Queue("d1", ({"default": {"cpu": q("6"), "memory": q("3Gi")}},), "cohort-no-limits", LP, LP),
    Queue("d2", ({"default": {"cpu": q("6"), "memory": q("3Gi")}},), "cohort-no-limits", NEVER, ANY),
    Queue("l1", ({"default": {"cpu": q("6", "12"), "memory": q("3Gi", "6Gi")}},), "legion", LP, LP),
    Queue("preventStarvation", ({"default": {"cpu": q("6")}},), within=LONEP),
    Queue("a_standard", ({"default": {"cpu": q("1", "12")}},), "with_shared_cq", NEVER, LP, LP, 0),
    Queue("b_standard", ({"default": {"cpu": q("1", "12")}},), "with_shared_cq", LP, ANY, LP, 0),
    Queue("a_best_effort", ({"default": {"cpu": q("1", "12")}},), "with_shared_cq", NEVER, LP, LP, 0),
    Queue("b_best_effort", ({"default": {"cpu": q("0", "13")}},), "with_shared_cq", NEVER, LP, LP, 0),
    Queue("shared", ({"default": {"cpu": q("10")}},), "with_shared_cq"),
    Queue("lend1", ({"default": {"cpu": q("6", None, "4")}},), "cohort-lend", LP, LP),
    Queue("lend2", ({"default": {"cpu": q("6", None, "2")}},), "cohort-lend", LP, LP),
    Queue("a", ({"default": {"cpu": q("2"), "memory": q("2")}},), "cohort-three", LP, ANY),
    Queue("b", ({"default": {"cpu": q("2"), "memory": q("2")}},), "cohort-three"),
    Queue("c", ({"default": {"cpu": q("2"), "memory": q("2")}},), "cohort-three"),
)

PT = "preemption_test.go TestPreemption"

CLASSICAL: tuple[Case, ...] = (
    Case(
        "preempt lowest priority",
        f"{PT} :293",
        DEFAULT_QUEUES,
        (
            "low@standalone p=-1 cpu:default=2",
            "mid@standalone cpu:default=2",
            "high@standalone p=1 cpu:default=2",
        ),
        "standalone p=1 cpu:default=2!",
        {"low": IN_CQ},
    ),
    Case(
        "preempt multiple",
        f"{PT} :397",
        DEFAULT_QUEUES,
        (
            "low@standalone p=-1 cpu:default=2",
            "mid@standalone cpu:default=2",
            "high@standalone p=1 cpu:default=2",
        ),
        "standalone p=1 cpu:default=3!",
        {"low": IN_CQ, "mid": IN_CQ},
    ),
    Case(
        "no preemption for low priority",
        f"{PT} :516",
        DEFAULT_QUEUES,
        ("low@standalone p=-1 cpu:default=3", "mid@standalone cpu:default=3"),
        "standalone p=-1 cpu:default=1!",
        {},
    ),
    Case(
        "not enough low priority workloads",
        f"{PT} :580",
        DEFAULT_QUEUES,
        ("low@standalone p=-1 cpu:default=3", "mid@standalone cpu:default=3"),
        "standalone cpu:default=4!",
        {},
    ),
    Case(
        "some free quota, preempt low priority",
        f"{PT} :643",
        DEFAULT_QUEUES,
        (
            "low@standalone p=-1 cpu:default=1",
            "mid@standalone cpu:default=1",
            "high@standalone p=1 cpu:default=3",
        ),
        "standalone p=1 cpu:default=2!",
        {"low": IN_CQ},
    ),
    Case(
        "minimal set excludes low priority",
        f"{PT} :747",
        DEFAULT_QUEUES,
        (
            "low@standalone p=-1 cpu:default=1",
            "mid@standalone cpu:default=2",
            "high@standalone p=1 cpu:default=3",
        ),
        "standalone p=1 cpu:default=2!",
        {"mid": IN_CQ},
    ),
    Case(
        "only preempt workloads using the chosen flavor",
        f"{PT} :851",
        DEFAULT_QUEUES,
        (
            "low@standalone p=-1 memory:alpha=2Gi",
            "mid@standalone memory:beta=1Gi",
            "high@standalone p=1 memory:beta=1Gi",
        ),
        "standalone p=1 cpu:default=1 memory:beta=2Gi!",
        {"mid": IN_CQ},
    ),
    Case(
        "reclaim quota from borrower",
        f"{PT} :960",
        DEFAULT_QUEUES,
        ("c1-low@c1 p=-1 cpu:default=3", "c2-mid@c2 cpu:default=3", "c2-high@c2 p=1 cpu:default=6"),
        "c1 p=1 cpu:default=3!",
        {"c2-mid": RECLAIM},
    ),
    Case(
        "reclaim quota if workload requests 0 resources for a resource at nominal quota",
        f"{PT} :1064",
        DEFAULT_QUEUES,
        (
            "c1-low@c1 p=-1 cpu:default=3 memory:default=3Gi",
            "c2-mid@c2 cpu:default=3",
            "c2-high@c2 p=1 cpu:default=6",
        ),
        "c1 p=1 cpu:default=3! memory:default=0",
        {"c2-mid": RECLAIM},
    ),
    Case(
        "no workloads borrowing",
        f"{PT} :1133",
        DEFAULT_QUEUES,
        ("c1-high@c1 p=1 cpu:default=4", "c2-low-1@c2 p=-1 cpu:default=4"),
        "c1 p=1 cpu:default=4!",
        {},
    ),
    Case(
        "not enough workloads borrowing",
        f"{PT} :1199",
        DEFAULT_QUEUES,
        ("c1-high@c1 p=1 cpu:default=4", "c2-low-1@c2 p=-1 cpu:default=4", "c2-low-2@c2 p=-1 cpu:default=4"),
        "c1 p=1 cpu:default=4!",
        {},
    ),
    Case(
        "preempting locally and borrowing other resources in cohort, without cohort candidates",
        f"{PT} :1289",
        DEFAULT_QUEUES,
        ("c1-low@c1 p=-1 cpu:default=4", "c2-low-1@c2 p=-1 cpu:default=4", "c2-high-2@c2 p=1 cpu:default=4"),
        "c1 p=1 cpu:default=4! memory:default=5Gi!",
        {"c1-low": IN_CQ},
    ),
    Case(
        "preempting locally and borrowing same resource in cohort",
        f"{PT} :1400",
        DEFAULT_QUEUES,
        ("c1-med@c1 cpu:default=4", "c1-low@c1 p=-1 cpu:default=4", "c2-low-1@c2 p=-1 cpu:default=4"),
        "c1 p=1 cpu:default=4!",
        {"c1-low": IN_CQ},
    ),
    Case(
        "preempting locally and borrowing same resource in cohort; no borrowing limit in the cohort",
        f"{PT} :1506",
        DEFAULT_QUEUES,
        ("d1-med@d1 cpu:default=4", "d1-low@d1 p=-1 cpu:default=4", "d2-low-1@d2 p=-1 cpu:default=4"),
        "d1 p=1 cpu:default=4!",
        {"d1-low": IN_CQ},
    ),
    Case(
        "preempting locally and borrowing other resources in cohort, with cohort candidates",
        f"{PT} :1612",
        DEFAULT_QUEUES,
        (
            "c1-med@c1 cpu:default=4",
            "c2-low-1@c2 p=-1 cpu:default=5",
            "c2-low-2@c2 p=-1 cpu:default=1",
            "c2-low-3@c2 p=-1 cpu:default=1",
        ),
        "c1 p=1 cpu:default=2! memory:default=5Gi!",
        {"c1-med": IN_CQ},
    ),
    Case(
        "preempting locally and not borrowing same resource in 1-queue cohort",
        f"{PT} :1747",
        DEFAULT_QUEUES,
        ("l1-med@l1 cpu:default=4", "l1-low@l1 p=-1 cpu:default=2"),
        "l1 p=1 cpu:default=4!",
        {"l1-med": IN_CQ},
    ),
    Case(
        "do not reclaim borrowed quota from same priority for withinCohort=ReclaimFromLowerPriority",
        f"{PT} :1829",
        DEFAULT_QUEUES,
        ("c1@c1 cpu:default=2", "c2-1@c2 cpu:default=4", "c2-2@c2 cpu:default=4"),
        "c1 cpu:default=4!",
        {},
    ),
    Case(
        "reclaim borrowed quota from same priority for withinCohort=ReclaimFromAny",
        f"{PT} :1912",
        DEFAULT_QUEUES,
        ("c1-1@c1 cpu:default=4", "c1-2@c1 p=1 cpu:default=4", "c2@c2 cpu:default=2"),
        "c2 cpu:default=4!",
        {"c1-1": RECLAIM},
    ),
    Case(
        "preempt from all ClusterQueues in cohort",
        f"{PT} :2013",
        DEFAULT_QUEUES,
        (
            "c1-low@c1 p=-1 cpu:default=3",
            "c1-mid@c1 cpu:default=2",
            "c2-low@c2 p=-1 cpu:default=3",
            "c2-mid@c2 cpu:default=4",
        ),
        "c1 cpu:default=4!",
        {"c1-low": IN_CQ, "c2-low": RECLAIM},
    ),
    Case(
        "can't preempt workloads in ClusterQueue for withinClusterQueue=Never",
        f"{PT} :2153",
        DEFAULT_QUEUES,
        ("c2-low@c2 p=-1 cpu:default=3",),
        "c2 p=1 cpu:default=4!",
        {},
    ),
    Case(
        "each podset preempts a different flavor",
        f"{PT} :2195",
        DEFAULT_QUEUES,
        ("low-alpha@standalone p=-1 memory:alpha=2Gi", "low-beta@standalone p=-1 memory:beta=2Gi"),
        "standalone memory:alpha=2Gi! memory:beta=2Gi!",
        {"low-alpha": IN_CQ, "low-beta": IN_CQ},
    ),
    Case(
        "preempt newer workloads with the same priority",
        f"{PT} :2314",
        DEFAULT_QUEUES,
        (
            "wl1@preventStarvation p=2 cpu:default=2",
            "wl2@preventStarvation p=1 created=0 cpu:default=2 t=1",
            "wl3@preventStarvation p=1 created=0 cpu:default=2",
        ),
        "preventStarvation p=1 created=-15 cpu:default=2!",
        {"wl2": IN_CQ},
    ),
    Case(
        "use BorrowWithinCohort; allow preempting a lower-priority workload from another ClusterQueue while "
        "borrowing",
        f"{PT} :2435",
        DEFAULT_QUEUES,
        (
            "a_best_effort_low@a_best_effort p=-1 cpu:default=10",
            "b_best_effort_low@b_best_effort p=-1 cpu:default=1",
        ),
        "a_standard cpu:default=10!",
        {"a_best_effort_low": WHILE_BORROWING},
    ),
    Case(
        "use BorrowWithinCohort; don't allow preempting a lower-priority workload with priority above "
        "MaxPriorityThreshold, if borrowing is required even after the preemption",
        f"{PT} :2516",
        DEFAULT_QUEUES,
        ("b_standard@b_standard p=1 cpu:default=10",),
        "a_standard p=2 cpu:default=10!",
        {},
    ),
    Case(
        "use BorrowWithinCohort; allow preempting a lower-priority workload with priority above "
        "MaxPriorityThreshold, if borrowing is not required after the preemption",
        f"{PT} :2558",
        DEFAULT_QUEUES,
        ("b_standard@b_standard p=1 cpu:default=13",),
        "a_standard p=2 cpu:default=1!",
        {"b_standard": RECLAIM},
    ),
    Case(
        "use BorrowWithinCohort; don't allow for preemption of lower-priority workload from the same "
        "ClusterQueue",
        f"{PT} :2619",
        DEFAULT_QUEUES,
        ("a_standard@a_standard p=1 cpu:default=13",),
        "a_standard p=2 cpu:default=1!",
        {},
    ),
    Case(
        "use BorrowWithinCohort; only preempt from CQ if no workloads below threshold and already above "
        "nominal",
        f"{PT} :2661",
        DEFAULT_QUEUES,
        (
            "a_standard_1@a_standard p=1 cpu:default=10",
            "a_standard_2@a_standard p=1 cpu:default=1",
            "b_standard_1@b_standard p=1 cpu:default=1",
            "b_standard_2@b_standard p=2 cpu:default=1",
        ),
        "b_standard p=3 cpu:default=1!",
        {"b_standard_1": IN_CQ},
    ),
    Case(
        "use BorrowWithinCohort; preempt from CQ and from other CQs with workloads below threshold",
        f"{PT} :2791",
        DEFAULT_QUEUES,
        (
            "b_standard_high@b_standard p=2 cpu:default=10",
            "b_standard_mid@b_standard p=1 cpu:default=1",
            "a_best_effort_low@a_best_effort p=-1 cpu:default=1",
            "a_best_effort_lower@a_best_effort p=-2 cpu:default=1",
        ),
        "b_standard p=2 cpu:default=2!",
        {"a_best_effort_lower": WHILE_BORROWING, "b_standard_mid": IN_CQ},
    ),
    Case(
        "reclaim quota from lender",
        f"{PT} :2936",
        DEFAULT_QUEUES,
        (
            "lend1-low@lend1 p=-1 cpu:default=3",
            "lend2-mid@lend2 cpu:default=3",
            "lend2-high@lend2 p=1 cpu:default=4",
        ),
        "lend1 p=1 cpu:default=3!",
        {"lend2-mid": RECLAIM},
    ),
    Case(
        "preempt from all ClusterQueues in cohort-lend",
        f"{PT} :3040",
        DEFAULT_QUEUES,
        (
            "lend1-low@lend1 p=-1 cpu:default=3",
            "lend1-mid@lend1 cpu:default=2",
            "lend2-low@lend2 p=-1 cpu:default=3",
            "lend2-mid@lend2 cpu:default=4",
        ),
        "lend1 cpu:default=4!",
        {"lend1-low": IN_CQ, "lend2-low": RECLAIM},
    ),
    Case(
        "cannot preempt from other ClusterQueues if exceeds requestable quota including lending limit",
        f"{PT} :3180",
        DEFAULT_QUEUES,
        ("lend2-low@lend2 p=-1 cpu:default=10",),
        "lend1 cpu:default=9!",
        {},
    ),
    Case(
        "preemptions from cq when target queue is exhausted for the single requested resource",
        f"{PT} :3221",
        DEFAULT_QUEUES,
        (
            "a1@a p=-2 cpu:default=1",
            "a2@a p=-2 cpu:default=1",
            "a3@a p=-1 cpu:default=1",
            "b1@b cpu:default=1",
            "b2@b cpu:default=1",
            "b3@b cpu:default=1",
        ),
        "a cpu:default=2!",
        {"a1": IN_CQ, "a2": IN_CQ},
    ),
    Case(
        "preemptions from cq when target queue is exhausted for two requested resources",
        f"{PT} :3414",
        DEFAULT_QUEUES,
        (
            "a1@a p=-2 cpu:default=1 memory:default=1",
            "a2@a p=-2 cpu:default=1 memory:default=1",
            "a3@a p=-1 cpu:default=1 memory:default=1",
            "b1@b cpu:default=1 memory:default=1",
            "b2@b cpu:default=1 memory:default=1",
            "b3@b cpu:default=1 memory:default=1",
        ),
        "a cpu:default=2! memory:default=2!",
        {"a1": IN_CQ, "a2": IN_CQ},
    ),
    Case(
        "preemptions from cq when target queue is exhausted for one requested resource, but not the other",
        f"{PT} :3636",
        DEFAULT_QUEUES,
        (
            "a1@a p=-2 cpu:default=1",
            "a2@a p=-2 cpu:default=1",
            "a3@a p=-1 cpu:default=1",
            "b1@b cpu:default=1",
            "b2@b cpu:default=1",
            "b3@b cpu:default=1",
        ),
        "a cpu:default=2! memory:default=2!",
        {"a1": IN_CQ, "a2": IN_CQ},
    ),
    Case(
        "allow preemption from other cluster queues if target cq is not exhausted for the requested resource",
        f"{PT} :3834",
        DEFAULT_QUEUES,
        (
            "a1@a p=-1 cpu:default=1",
            "b1@b cpu:default=1",
            "b2@b cpu:default=1",
            "b3@b cpu:default=1",
            "b4@b cpu:default=1",
            "b5@b p=-1 cpu:default=1",
        ),
        "a cpu:default=2!",
        {"a1": IN_CQ, "b5": RECLAIM},
    ),
    Case(
        "long range preemption",
        f"{PT} :4026",
        (
            Queue("cq-left", ({"default": {"cpu": q("10")}},), "cohort-left", reclaim=ANY),
            Queue("cq-right", ({"default": {"cpu": q("0")}},), "cohort-right"),
        ),
        ("to-be-preempted@cq-right cpu:default=5",),
        "cq-left cpu:default=8!",
        {"to-be-preempted": RECLAIM},
        cohorts=(CohortNode("root"), CohortNode("cohort-left", "root"), CohortNode("cohort-right", "root")),
    ),
)

HT = "preemption_hierarchical_test.go TestHierarchicalPreemptions"


def _hq(
    name: str,
    cohort: str,
    cpu: str | None = None,
    borrow: bool = False,
    reclaim: str = ANY,
    within: str = LP,
    lending: str | None = None,
) -> Queue:
    groups: tuple[dict[str, dict[str, tuple[str, str | None, str | None]]], ...] = (
        ({"default": {"cpu": q(cpu, None, lending)}},) if cpu is not None else ({"default": {}},)
    )
    return Queue(name, groups, cohort, within, reclaim, LP if borrow else NEVER, 0 if borrow else None)


def _cohort(name: str, parent: str | None = None, **quota: str) -> CohortNode:
    return CohortNode(name, parent, ({"default": {r: q(v) for r, v in quota.items()}},) if quota else ())


R_C2 = (_cohort("r"), _cohort("c", "r", cpu="2"))

HIERARCHICAL: tuple[Case, ...] = (
    Case(
        "preempt with hierarchical advantage",
        f"{HT} :66",
        (_hq("q", "c"), _hq("q_borrowing", "r")),
        ("admitted2@q_borrowing cpu:default=2",),
        "q cpu:default=2!",
        {"admitted2": RECLAIM},
        R_C2,
    ),
    Case(
        "avoid queues within nominal quota",
        f"{HT} :143",
        (_hq("q_nominal", "r", "2"), _hq("q", "c"), _hq("q_borrowing", "r")),
        ("admitted1@q_nominal p=-10 cpu:default=2", "admitted2@q_borrowing cpu:default=2"),
        "q cpu:default=2!",
        {"admitted2": RECLAIM},
        R_C2,
    ),
    Case(
        "preempt multiple with hierarchical advantage",
        f"{HT} :242",
        (_hq("q", "c"), _hq("q_borrowing", "r")),
        ("admitted1@q_borrowing p=1 cpu:default=1", "admitted2@q_borrowing p=2 cpu:default=1"),
        "q cpu:default=2!",
        {"admitted1": RECLAIM, "admitted2": RECLAIM},
        R_C2,
    ),
    Case(
        "preempt in cohort and own CQ",
        f"{HT} :348",
        (_hq("q", "c", borrow=True), _hq("q_same_cohort", "c")),
        (
            "admitted_not_preemptible@q_same_cohort p=1 cpu:default=1",
            "admitted_preemptible@q_same_cohort cpu:default=2",
            "admitted_own_queue@q p=-1 cpu:default=1",
        ),
        "q p=1 cpu:default=2!",
        {"admitted_own_queue": IN_CQ, "admitted_preemptible": WHILE_BORROWING},
        (_cohort("r"), _cohort("c", "r", cpu="3")),
    ),
    Case(
        "prefer to preempt hierarchical candidate",
        f"{HT} :472",
        (_hq("q", "c"), _hq("q_borrowing", "r")),
        ("admitted_borrowing@q_borrowing p=1 cpu:default=1", "admitted_same_queue@q p=-2 cpu:default=1"),
        "q cpu:default=1!",
        {"admitted_borrowing": RECLAIM},
        R_C2,
    ),
    Case(
        "forced to preempt priority candidate",
        f"{HT} :563",
        (_hq("q", "c", borrow=True), _hq("q_nominal", "r", "2"), _hq("q_same_cohort", "c")),
        (
            "admitted_nominal@q_nominal p=-10 cpu:default=2",
            "admitted_same_cohort@q_same_cohort p=-1 cpu:default=2",
        ),
        "q cpu:default=2!",
        {"admitted_same_cohort": WHILE_BORROWING},
        R_C2,
    ),
    Case(
        "incoming workload fits in CQ nominal quota",
        f"{HT} :668",
        (_hq("q", "c", "4"), _hq("q_borrowing", "r"), _hq("q_same_cohort", "c")),
        (
            "admitted_borrowing@q_borrowing p=10 cpu:default=3",
            "admitted_same_cohort@q_same_cohort p=10 cpu:default=3",
        ),
        "q cpu:default=4!",
        {"admitted_borrowing": RECLAIM, "admitted_same_cohort": RECLAIM},
        R_C2,
    ),
    Case(
        "preempt hierarchical and priority candidates",
        f"{HT} :782",
        (_hq("q", "c", borrow=True, reclaim=LP), _hq("q_borrowing", "r"), _hq("q_same_cohort", "c")),
        (
            "admitted_borrowing@q_borrowing p=-1 cpu:default=2",
            "admitted_same_cohort_preemptible@q_same_cohort p=-1 cpu:default=1",
            "admitted_borrowing_not_preemptible@q_borrowing p=1 cpu:default=2",
        ),
        "q cpu:default=3!",
        {"admitted_borrowing": RECLAIM, "admitted_same_cohort_preemptible": WHILE_BORROWING},
        (_cohort("r", cpu="1"), _cohort("c", "r", cpu="4")),
    ),
    Case(
        "preempt hierarchical candidates and inside CQ",
        f"{HT} :916",
        (_hq("q", "c", borrow=True, reclaim=LP), _hq("q_borrowing", "r"), _hq("q_same_cohort", "c")),
        (
            "admitted_borrowing@q_borrowing p=-1 cpu:default=2",
            "admitted_same_queue_preemptible@q p=-1 cpu:default=1",
            "admitted_borrowing_not_preemptible@q_borrowing p=1 cpu:default=2",
        ),
        "q cpu:default=3!",
        {"admitted_borrowing": RECLAIM, "admitted_same_queue_preemptible": IN_CQ},
        (_cohort("r", cpu="1"), _cohort("c", "r", cpu="4")),
    ),
    Case(
        "reclaim nominal quota from lowest priority workload, excluding non-borrowing",
        f"{HT} :1049",
        (_hq("q", "c"), _hq("q_borrowing", "r"), _hq("q_nominal", "r", "2")),
        (
            "admitted_borrowing_prio_8@q_borrowing p=8 cpu:default=1",
            "admitted_borrowing_prio_9@q_borrowing p=9 cpu:default=1",
            "admitted_borrowing_prio_10@q_borrowing p=9 cpu:default=1",
            "admitted_nominal@q_nominal p=-2 cpu:default=2",
        ),
        "q cpu:default=1!",
        {"admitted_borrowing_prio_8": RECLAIM},
        (_cohort("r"), _cohort("c", "r", cpu="3")),
    ),
    Case(
        "infeasible preemption all available workloads in pruned subtrees",
        f"{HT} :1176",
        (_hq("q_other", "c_other"), _hq("q", "c"), _hq("q_same_cohort", "c")),
        (
            "admitted_other_1@q_other p=-10 cpu:default=1",
            "admitted_other_2@q_other p=-10 cpu:default=1",
            "admitted_same_cohort@q_same_cohort cpu:default=2",
        ),
        "q cpu:default=2!",
        {},
        (_cohort("r"), _cohort("c", "r", cpu="2"), _cohort("c_other", "r", cpu="2")),
    ),
    Case(
        "hiearchical preemption with multiple resources",
        f"{HT} :1277",
        (_hq("q", "c"), _hq("q_borrowing", "r"), _hq("q_same_cohort", "c")),
        (
            "admitted_borrowing@q_borrowing cpu:default=3 memory:default=1Gi",
            "admitted_same_cohort@q_same_cohort p=-2 cpu:default=1 memory:default=3Gi",
        ),
        "q p=-2 cpu:default=2! memory:default=1Gi!",
        {"admitted_borrowing": RECLAIM},
        (_cohort("r", cpu="3"), _cohort("c", "r", cpu="4", memory="4Gi")),
    ),
    Case(
        "prefer to preempt evicted workloads",
        f"{HT} :1393",
        (_hq("q", "c", borrow=True), _hq("q_borrowing", "r"), _hq("q_same_cohort", "c")),
        (
            "admitted_borrowing@q_borrowing p=-10 cpu:default=1",
            "evicted_same_cohort@q_same_cohort p=-1 cpu:default=1 evicted",
        ),
        "q cpu:default=1!",
        {"evicted_same_cohort": WHILE_BORROWING},
        R_C2,
    ),
    Case(
        "respect lending limits",
        f"{HT} :1491",
        (_hq("q", "c", "3", lending="2"), _hq("q_borrowing", "r")),
        ("admitted_borrowing@q_borrowing cpu:default=4",),
        "q p=-2 cpu:default=5!",
        {"admitted_borrowing": RECLAIM},
        R_C2,
    ),
    Case(
        "reclaim in complex hierarchy",
        f"{HT} :1575",
        tuple(
            _hq(name, cohort)
            for name, cohort in (("q1", "c12"), ("q2", "c23"), ("q3", "c22"), ("q4", "c32"), ("q5", "c31"))
        ),
        (
            "admitted_borrowing_1@q1 p=-6 cpu:default=4",
            "admitted_borrowing_2@q1 p=-5 cpu:default=4",
            "admitted_borrowing_3@q2 p=-9 cpu:default=4",
            "admitted_borrowing_4@q2 p=-10 cpu:default=4",
            "admitted_borrowing_5@q3 p=-4 cpu:default=4",
            "admitted_borrowing_6@q3 p=-3 cpu:default=3",
            "admitted_borrowing_7@q4 p=4 cpu:default=2",
            "admitted_borrowing_8@q4 p=2 cpu:default=3",
        ),
        "q5 p=-2 cpu:default=7!",
        {"admitted_borrowing_1": RECLAIM, "admitted_borrowing_4": RECLAIM},
        (
            _cohort("r"),
            _cohort("c11", "r", cpu="4"),
            _cohort("c12", "r", cpu="4"),
            _cohort("c21", "c11", cpu="4"),
            _cohort("c22", "c11", cpu="4"),
            _cohort("c23", "c11", cpu="4"),
            _cohort("c31", "c21", cpu="4"),
            _cohort("c32", "c21", cpu="4"),
        ),
    ),
)

CASES = CLASSICAL + HIERARCHICAL
