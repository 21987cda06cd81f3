from __future__ import annotations

from dataclasses import replace

from rayquota.operator.queue.admission.driver import Driver
from rayquota.queueing import Engine
from tests.unit.queue.fakes import GPU, gpu_workload, new_driver


def gpu_usage(driver: Driver, cq: str) -> int:
    return driver.engine.usage(cq).get(("f", GPU), 0) // 1000


def test_admission_is_written_and_a_waiting_workload_gets_the_reason() -> None:
    driver, writer = new_driver()
    driver.submit(gpu_workload("one", "a", {"w1": 12}, created=1))
    driver.submit(gpu_workload("two", "a", {"w1": 8}, created=2))
    driver.cycle(0)
    assert writer.admissions["ns/one"].counts() == {"w1": 12}  # borrows 4 from b
    assert "ns/two" not in writer.admissions and "needs 8 gpu" in writer.reasons["ns/two"]
    assert driver.pending_reason("ns/two") == writer.reasons["ns/two"]


def test_scale_up_is_a_slice_that_needs_only_the_difference() -> None:
    driver, writer = new_driver()
    driver.submit(gpu_workload("svc", "a", {"w1": 6}))
    driver.cycle(0)
    driver.submit(gpu_workload("svc", "a", {"w1": 6, "w2": 5}))  # 16 GPUs wanted in all
    driver.cycle(1)
    assert writer.admissions["ns/svc"].counts() == {"w1": 6, "w2": 5}
    assert gpu_usage(driver, "a") == 16  # transferred, not 6 + 16
    # Only one engine slice holds quota.
    assert [k for k in driver.engine.workload_keys() if driver.engine.workload(k).phase != "Pending"] == [
        "ns/svc~1"
    ]


def test_scale_up_that_does_not_fit_waits_while_the_admitted_slice_keeps_running() -> None:
    driver, writer = new_driver()
    driver.submit(gpu_workload("svc", "a", {"w1": 8}))
    driver.submit(gpu_workload("other", "b", {"w1": 8}))
    driver.cycle(0)
    driver.submit(gpu_workload("svc", "a", {"w1": 8, "w2": 1}))
    driver.cycle(1)
    assert writer.admissions["ns/svc"].counts() == {"w1": 8}
    assert driver.admission("ns/svc") is not None and "ns/svc" in writer.reasons
    # Going back down drops the waiting slice.
    driver.submit(gpu_workload("svc", "a", {"w1": 8}))
    driver.cycle(2)
    assert driver.pending_reason("ns/svc") is None and gpu_usage(driver, "a") == 8


def test_scale_down_applies_at_once() -> None:
    driver, _ = new_driver()
    driver.submit(gpu_workload("svc", "a", {"w1": 8}))
    driver.cycle(0)
    driver.submit(gpu_workload("svc", "a", {"w1": 3}))
    assert gpu_usage(driver, "a") == 3
    assert driver.admission("ns/svc") is not None and driver.admission("ns/svc").counts() == {"w1": 3}


def test_preemption_frees_quota_only_after_pods_are_gone() -> None:
    driver, writer = new_driver()
    driver.submit(gpu_workload("borrower", "b", {"w1": 12}))
    driver.cycle(0)
    driver.submit(gpu_workload("owner", "a", {"w1": 8}, priority=10))
    driver.cycle(1)
    assert "ns/borrower" in writer.evicting and "ns/owner" not in writer.admissions
    driver.cycle(2)  # pods still there: nothing moves
    assert gpu_usage(driver, "b") == 12 and "ns/owner" not in writer.admissions
    driver.pods_gone("ns/borrower")
    driver.cycle(3)
    assert writer.admissions["ns/owner"].counts() == {"w1": 8}
    assert driver.admission("ns/borrower") is None and driver.pending_reason("ns/borrower")


def test_finish_holds_quota_until_pods_are_gone() -> None:
    driver, _ = new_driver()
    driver.submit(gpu_workload("job", "a", {"w1": 4}))
    driver.cycle(0)
    driver.finish("ns/job", pods_gone=False)
    assert gpu_usage(driver, "a") == 4
    driver.pods_gone("ns/job")
    assert gpu_usage(driver, "a") == 0 and driver.keys() == []


def test_restore_rebuilds_usage_and_submit_after_restore_admits_nothing_twice() -> None:
    driver, writer = new_driver()
    driver.submit(gpu_workload("job", "a", {"w1": 4}))
    driver.cycle(0)
    restarted, writer2 = new_driver()
    admission = writer.admissions["ns/job"]
    spec = gpu_workload("job", "a", {"w1": 4})
    restarted.restore(spec, admission.cluster_queue, admission.pod_sets, evicting=False)
    restarted.submit(spec)
    restarted.cycle(1)
    assert gpu_usage(restarted, "a") == 4 and writer2.admit_calls == []
    assert isinstance(restarted.engine, Engine)


def test_a_deactivated_workload_evicted_by_a_check_is_known_inactive_before_its_release() -> None:
    # A check Rejected it: evicted, then deactivated. The status written as its quota is released
    # says why it will wait (no cycle will decide it), not "waiting for the next admission cycle".
    driver, _ = new_driver()
    driver.submit(gpu_workload("job", "a", {"w1": 4}))
    driver.cycle(0)
    assert driver.reason_once_released("ns/job") is None  # active: the next cycle decides
    driver.evict("ns/job", "AdmissionCheck rejected", "AdmissionCheck")
    driver.submit(replace(gpu_workload("job", "a", {"w1": 4}), active=False))
    assert driver.reason_once_released("ns/job") == "workload ns/job is inactive"
    driver.pods_gone("ns/job")
    driver.cycle(1)
    assert driver.pending_reason("ns/job") == driver.reason_once_released("ns/job")
