from __future__ import annotations

from prometheus_client import REGISTRY

from rayquota.operator.queue.reporting import metrics
from tests.unit.queue.fakes import gpu_workload, new_driver


def sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_queue_gauges_and_cycle_counters_follow_the_engine() -> None:
    driver, _ = new_driver()
    driver.submit(gpu_workload("big", "a", {"w1": 12}))  # borrows 4 from b
    driver.submit(gpu_workload("late", "a", {"w1": 8}))
    before_success = sample("rayquota_admission_attempts_total", result="success") or 0
    before_inadmissible = sample("rayquota_admission_attempts_total", result="inadmissible") or 0
    metrics.observe_cycle(0.01, driver.cycle(0))
    metrics.observe_queues(driver.engine)
    assert sample("rayquota_admission_attempts_total", result="success") == before_success + 1
    assert sample("rayquota_admission_attempts_total", result="inadmissible") == before_inadmissible + 1
    labels = {"cluster_queue": "a", "flavor": "f", "resource": "gpu"}
    assert sample("rayquota_cluster_queue_resource_usage", **labels) == 12
    assert sample("rayquota_cluster_queue_nominal_quota", **labels) == 8
    assert sample("rayquota_cluster_queue_borrowing", **labels) == 4
    assert sample("rayquota_admitted_active_workloads", cluster_queue="a") == 1
    # "late" did not fit: parked until something in the cohort changes (Kueue's inadmissible).
    assert sample("rayquota_pending_workloads", cluster_queue="a", status="inadmissible") == 1
    assert sample("rayquota_pending_workloads", cluster_queue="a", status="active") == 0
    driver.submit(gpu_workload("new", "a", {"w1": 1}))
    metrics.observe_queues(driver.engine)
    assert sample("rayquota_pending_workloads", cluster_queue="a", status="active") == 1
