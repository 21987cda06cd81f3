"""Kueue's metric families (pkg/metrics/metrics.go at v0.19.2) as a scrape shows them: Kueue's
names and label names, with values from the engine and the driver's decisions."""

from __future__ import annotations

import math

from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rayquota.operator.queue.admission.admission_loop import EnqueueingWriter
from rayquota.operator.queue.admission.driver import Driver
from rayquota.operator.queue.reporting import kueue_metrics, metrics
from rayquota.queueing import Admit, Engine, Preempt
from tests.unit.queue.fakes import gpu_workload, two_teams

CQ_RESOURCE = {"cohort", "cluster_queue", "flavor", "resource", "replica_role"}
LQ_RESOURCE = {"name", "namespace", "flavor", "resource", "replica_role"}
LQ_PRIORITY = {"name", "namespace", "priority_class", "replica_role"}
# Kueue's label names per family (without its optional custom labels).
KUEUE_LABELS = {
    "kueue_admission_attempts_total": {"result", "replica_role"},
    "kueue_admission_attempt_duration_seconds": {"result", "replica_role"},
    "kueue_pending_workloads": {"cluster_queue", "status", "replica_role"},
    "kueue_reserving_active_workloads": {"cluster_queue", "replica_role"},
    "kueue_admitted_active_workloads": {"cluster_queue", "replica_role"},
    "kueue_cluster_queue_status": {"cluster_queue", "status", "replica_role"},
    "kueue_quota_reserved_workloads_total": {"cluster_queue", "priority_class", "replica_role"},
    "kueue_admitted_workloads_total": {"cluster_queue", "priority_class", "replica_role"},
    "kueue_quota_reserved_wait_time_seconds": {"cluster_queue", "priority_class", "replica_role"},
    "kueue_admission_wait_time_seconds": {"cluster_queue", "priority_class", "replica_role"},
    "kueue_evicted_workloads_total": {
        "cluster_queue",
        "reason",
        "underlying_cause",
        "priority_class",
        "replica_role",
    },
    "kueue_preempted_workloads_total": {"preempting_cluster_queue", "reason", "replica_role"},
    "kueue_replaced_workload_slices_total": {"cluster_queue", "replica_role"},
    "kueue_cluster_queue_resource_reservation": CQ_RESOURCE,
    "kueue_cluster_queue_resource_usage": CQ_RESOURCE,
    "kueue_cluster_queue_nominal_quota": CQ_RESOURCE,
    "kueue_cluster_queue_borrowing_limit": CQ_RESOURCE,
    "kueue_cluster_queue_lending_limit": CQ_RESOURCE,
    # Per LocalQueue (Kueue's label ``name`` is the LocalQueue's).
    "kueue_local_queue_pending_workloads": {"name", "namespace", "status", "replica_role"},
    "kueue_local_queue_reserving_active_workloads": {"name", "namespace", "replica_role"},
    "kueue_local_queue_admitted_active_workloads": {"name", "namespace", "replica_role"},
    "kueue_local_queue_status": {"name", "namespace", "active", "replica_role"},
    "kueue_local_queue_quota_reserved_workloads_total": LQ_PRIORITY,
    "kueue_local_queue_admitted_workloads_total": LQ_PRIORITY,
    "kueue_local_queue_quota_reserved_wait_time_seconds": LQ_PRIORITY,
    "kueue_local_queue_admission_wait_time_seconds": LQ_PRIORITY,
    "kueue_local_queue_evicted_workloads_total": {
        "name",
        "namespace",
        "reason",
        "underlying_cause",
        "priority_class",
        "replica_role",
    },
    "kueue_local_queue_resource_reservation": LQ_RESOURCE,
    "kueue_local_queue_resource_usage": LQ_RESOURCE,
    # Fair sharing, and admission fair sharing per LocalQueue.
    "kueue_cluster_queue_weighted_share": {"cluster_queue", "cohort", "replica_role"},
    "kueue_cohort_weighted_share": {"cohort", "replica_role"},
    "kueue_local_queue_admission_fair_sharing_usage": {"name", "namespace", "cluster_queue", "replica_role"},
}
# Histograms add ``le`` to their buckets' samples.
BUCKET_LABEL = "le"


def sample(family: str, /, **labels: str) -> float:
    return REGISTRY.get_sample_value(family, {**labels, "replica_role": "leader"}) or 0.0


def _driver() -> Driver:
    driver: Driver | None = None
    writer = EnqueueingWriter(cluster_queue_of=lambda key: driver.cluster_queue_of(key) if driver else None)
    driver = Driver(Engine(), writer)
    for obj in two_teams(8):
        driver.configure(obj)
    return driver


def _cycle(driver: Driver, now: float) -> list[object]:
    decisions = driver.cycle(now)
    metrics.observe_cycle(0.01, decisions)
    kueue_metrics.observe_cycle(
        0.01, decisions, lambda key: (s := driver.engine.workload(key)) and s.cluster_queue
    )
    return list(decisions)


def test_kueue_families_follow_admissions_preemptions_and_quota() -> None:
    driver = _driver()
    success = sample("kueue_admission_attempts_total", result="success")
    reclaimed = sample(
        "kueue_preempted_workloads_total", preempting_cluster_queue="b", reason="InCohortReclamation"
    )
    evicted = sample(
        "kueue_evicted_workloads_total",
        cluster_queue="a",
        reason="Preempted",
        underlying_cause="",
        priority_class="",
    )
    driver.submit(gpu_workload("big", "a", {"w1": 12}))  # borrows 4 of b's GPUs
    assert [d for d in _cycle(driver, 0) if isinstance(d, Admit)]
    assert sample("kueue_admission_attempts_total", result="success") == success + 1
    metrics.observe_queues(driver.engine)
    labels = {"cohort": "pool", "cluster_queue": "a", "flavor": "f", "resource": "gpu"}
    assert sample("kueue_cluster_queue_resource_usage", **labels) == 12
    assert sample("kueue_cluster_queue_resource_reservation", **labels) == 12
    assert sample("kueue_cluster_queue_nominal_quota", **labels) == 8
    assert math.isinf(sample("kueue_cluster_queue_borrowing_limit", **labels))  # unlimited, as Kueue says it
    assert math.isinf(sample("kueue_cluster_queue_lending_limit", **labels))
    assert sample("kueue_reserving_active_workloads", cluster_queue="a") == 1
    assert sample("kueue_admitted_active_workloads", cluster_queue="a") == 1

    driver.submit(gpu_workload("claim", "b", {"w1": 8}, priority=10))  # b reclaims its nominal quota
    assert [d for d in _cycle(driver, 1) if isinstance(d, Preempt)]
    assert (
        sample("kueue_preempted_workloads_total", preempting_cluster_queue="b", reason="InCohortReclamation")
        == reclaimed + 1
    )
    assert (
        sample(
            "kueue_evicted_workloads_total",
            cluster_queue="a",
            reason="Preempted",
            underlying_cause="",
            priority_class="",
        )
        == evicted + 1
    )
    metrics.observe_queues(driver.engine)
    assert (
        sample("kueue_pending_workloads", cluster_queue="b", status="active")
        + sample("kueue_pending_workloads", cluster_queue="b", status="inadmissible")
        == 1
    )


def test_admission_and_status_families() -> None:
    workload = {
        "metadata": {"name": "w"},
        "spec": {"priorityClassRef": {"kind": "WorkloadPriorityClass", "name": "hi"}},
    }
    before = sample("kueue_admitted_workloads_total", cluster_queue="a", priority_class="hi")
    kueue_metrics.observe_admission(workload, "a", 3.0)
    assert sample("kueue_admitted_workloads_total", cluster_queue="a", priority_class="hi") == before + 1
    assert sample("kueue_quota_reserved_workloads_total", cluster_queue="a", priority_class="hi") >= 1
    assert sample("kueue_admission_wait_time_seconds_count", cluster_queue="a", priority_class="hi") >= 1
    # Kueue's buckets: 1, then 2.5 doubling (16 for admission, 14 for quota reservation).
    assert (
        sample("kueue_admission_wait_time_seconds_bucket", cluster_queue="a", priority_class="hi", le="2.5")
        == 0
    )
    assert (
        sample("kueue_admission_wait_time_seconds_bucket", cluster_queue="a", priority_class="hi", le="5.0")
        >= 1
    )
    kueue_metrics.observe_cluster_queue_status("a", active=True, terminating=False)
    assert sample("kueue_cluster_queue_status", cluster_queue="a", status="active") == 1
    assert sample("kueue_cluster_queue_status", cluster_queue="a", status="pending") == 0
    kueue_metrics.observe_cluster_queue_status("a", active=False, terminating=True)
    assert sample("kueue_cluster_queue_status", cluster_queue="a", status="terminating") == 1
    assert sample("kueue_cluster_queue_status", cluster_queue="a", status="active") == 0


def test_local_queue_families() -> None:
    lq = {"name": "team", "namespace": "ns-lq"}
    workload = {
        "metadata": {"name": "w", "namespace": "ns-lq"},
        "spec": {"queueName": "team", "priorityClassRef": {"kind": "WorkloadPriorityClass", "name": "hi"}},
    }
    before = sample("kueue_local_queue_admitted_workloads_total", **lq, priority_class="hi")
    kueue_metrics.observe_admission(workload, "a", 3.0)
    assert sample("kueue_local_queue_admitted_workloads_total", **lq, priority_class="hi") == before + 1
    assert sample("kueue_local_queue_quota_reserved_workloads_total", **lq, priority_class="hi") >= 1
    # Kueue gives the LocalQueue's admission wait 14 buckets (the ClusterQueue's has 16).
    wait = "kueue_local_queue_admission_wait_time_seconds_bucket"
    assert sample(wait, **lq, priority_class="hi", le="2.5") == 0
    assert sample(wait, **lq, priority_class="hi", le="5.0") >= 1
    assert sample(wait, **lq, priority_class="hi", le="10240.0") >= 1
    assert (
        REGISTRY.get_sample_value(
            wait, {**lq, "priority_class": "hi", "le": "20480.0", "replica_role": "leader"}
        )
        is None
    )

    evicted = {**lq, "reason": "Preempted", "underlying_cause": "", "priority_class": ""}
    before = sample("kueue_local_queue_evicted_workloads_total", **evicted)
    kueue_metrics.observe_eviction("a", "InClusterQueue", ("ns-lq", "team"))
    assert sample("kueue_local_queue_evicted_workloads_total", **evicted) == before + 1

    pending = {
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "message": "needs 8 gpu"}]}
    }
    fresh = {"status": {"conditions": [{"type": "QuotaReserved", "status": "False", "message": "waiting"}]}}
    running = {"status": {"admission": {"clusterQueue": "a"}}}
    assert kueue_metrics.judged_pending([pending, fresh, running], "waiting") == 1
    status = {
        "pendingWorkloads": 2,
        "reservingWorkloads": 1,
        "admittedWorkloads": 1,
        "flavorsReservation": [{"name": "f", "resources": [{"name": "nvidia.com/gpu", "total": "4"}]}],
    }
    kueue_metrics.observe_local_queue("ns-lq", "team", status, 1, active=True)
    assert sample("kueue_local_queue_pending_workloads", **lq, status="active") == 1
    assert sample("kueue_local_queue_pending_workloads", **lq, status="inadmissible") == 1
    assert sample("kueue_local_queue_reserving_active_workloads", **lq) == 1
    assert sample("kueue_local_queue_admitted_active_workloads", **lq) == 1
    assert sample("kueue_local_queue_status", **lq, active="True") == 1
    assert sample("kueue_local_queue_status", **lq, active="False") == 0
    usage = {**lq, "flavor": "f", "resource": "nvidia.com/gpu"}
    assert sample("kueue_local_queue_resource_reservation", **usage) == 4
    assert sample("kueue_local_queue_resource_usage", **usage) == 4
    kueue_metrics.observe_local_queue("ns-lq", "team", status, 1, active=False)
    assert sample("kueue_local_queue_status", **lq, active="False") == 1
    assert sample("kueue_local_queue_status", **lq, active="True") == 0


def test_fair_sharing_families() -> None:
    kueue_metrics.observe_cluster_queue_weighted_share("a", "pool", 374.5)
    assert sample("kueue_cluster_queue_weighted_share", cluster_queue="a", cohort="pool") == 374.5
    kueue_metrics.observe_cluster_queue_weighted_share("zero", "pool", math.nan)  # weight 0, borrowing
    assert math.isnan(sample("kueue_cluster_queue_weighted_share", cluster_queue="zero", cohort="pool"))
    kueue_metrics.observe_cohort_weighted_share("pool", 120.0)
    assert sample("kueue_cohort_weighted_share", cohort="pool") == 120
    kueue_metrics.observe_admission_fair_sharing_usage("team", "ns-afs", "a", 2.5)
    assert (
        sample(
            "kueue_local_queue_admission_fair_sharing_usage",
            name="team",
            namespace="ns-afs",
            cluster_queue="a",
        )
        == 2.5
    )


def test_eviction_words_are_kueues() -> None:
    assert kueue_metrics.eviction_words("InClusterQueue") == ("Preempted", "")
    assert kueue_metrics.eviction_words("InCohortFairSharing") == ("Preempted", "")
    assert kueue_metrics.eviction_words("PodsReadyTimeout") == ("PodsReadyTimeout", "")
    assert kueue_metrics.eviction_words("ClusterQueueStopped") == ("ClusterQueueStopped", "")
    assert kueue_metrics.eviction_words("WorkloadDeactivated") == ("Deactivated", "")
    assert kueue_metrics.eviction_words("DeactivatedDueToAdmissionCheck") == ("Deactivated", "AdmissionCheck")


def test_a_scrape_shows_kueues_names_and_label_names() -> None:
    test_kueue_families_follow_admissions_preemptions_and_quota()
    test_admission_and_status_families()
    test_local_queue_families()
    test_fair_sharing_families()
    kueue_metrics.observe_cycle(0.2, [Admit("ns/w", "a", (), {}, replaces="ns/w#1")], lambda _: "a")
    families = {
        family.name: family for family in text_string_to_metric_families(generate_latest(REGISTRY).decode())
    }
    for name, expected in KUEUE_LABELS.items():
        # The text format names a counter's family without its ``_total``.
        family = families.get(name) or families.get(name.removesuffix("_total"))
        assert family is not None, f"{name} is not exported"
        assert family.samples, f"{name} has no samples"
        for sample_ in family.samples:
            assert set(sample_.labels) - {BUCKET_LABEL} == expected, (name, sample_.labels)
            assert sample_.labels["replica_role"] == "leader"
