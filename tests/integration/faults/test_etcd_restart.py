"""etcd killed and started again under the API server while RayJobs are admitted and others
wait: the API server and the operator carry on, admissions continue, nothing is admitted twice
or lost, and the gate's invariants hold throughout."""

from __future__ import annotations

import time
from collections.abc import Callable

from rayquota.localcluster.cluster import LocalCluster
from tests.gate_sampler import GateSampler
from tests.integration.faults.objects import admitted, gpu_rayjob, gpus_admitted, waiting, workload
from tests.integration.faults.support import admitted_once
from tests.integration.queue.conftest import Quota
from tests.integration.ray.kubehelpers import Kube
from tests.operator_process import OperatorProcess
from tests.polling import holds, wait_for

ETCD_DOWN_S = 5
RECOVERY_BOUND_S = 45


def test_etcd_killed_and_restarted_under_admissions(
    faults_cluster: LocalCluster,
    kube: Kube,
    quota: Quota,
    gate_sampler: Callable[..., GateSampler],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    cq = quota.a100_team_queue(8)
    sampler = gate_sampler(cq)
    operator = start_operator()
    operator.wait_reconciling()
    jobs = [f"job-{i}" for i in range(7)]
    for name in jobs:
        kube.apply(gpu_rayjob(name, "team", workers=1, gpus_per_worker=2))  # 4 of 7 fit
    wait_for("four RayJobs admitted", lambda: sum(admitted(sampler, "RayJob", j) for j in jobs) == 4, 120)
    wait_for("three RayJobs waiting", lambda: sum(waiting(sampler, "RayJob", j) for j in jobs) == 3, 120)

    def handed_on(deleted: str, admitted_jobs: int) -> Callable[[], bool]:
        def probe() -> bool:
            gone = workload(sampler, "RayJob", deleted) is None
            now = sum(admitted(sampler, "RayJob", j) for j in jobs)
            return gone and gpus_admitted(sampler) == 8 and now == admitted_jobs

        return probe

    # Without a fault first: how long a deleted job's quota takes to reach the next in line.
    first, second = [j for j in jobs if admitted(sampler, "RayJob", j)][:2]
    kube.kubectl("delete", "rayjob", first, "--wait=false")
    deleted_at = time.monotonic()
    wait_for(f"{first}'s quota handed on", handed_on(first, 4), timeout_s=180)
    baseline_s = time.monotonic() - deleted_at
    before = {j: (workload(sampler, "RayJob", j) or {}).get("status", {}).get("admission") for j in jobs}

    kube.kubectl("delete", "rayjob", second, "--wait=false")
    faults_cluster.stop_component("etcd", kill=True)
    holds("the operator running while etcd is down", operator.running, seconds=ETCD_DOWN_S)
    faults_cluster.start_component("etcd")
    back_at = time.monotonic()
    wait_for(f"{second}'s quota handed on", handed_on(second, 4), timeout_s=180)
    recovered_s = time.monotonic() - back_at
    print(
        f"\nFAULT-FIGURES etcd killed, down {ETCD_DOWN_S}s: a deleted job's quota handed on "
        f"{recovered_s:.1f}s after etcd was back ({baseline_s:.1f}s from the deletion without a fault)"
    )
    assert recovered_s < RECOVERY_BOUND_S, f"admissions resumed only {recovered_s:.1f}s after etcd"

    sampler.sync()
    assert admitted_once(sampler) == {}
    for name, admission in before.items():
        if admission and name != second:  # admitted before: the same admission still
            assert (workload(sampler, "RayJob", name) or {})["status"]["admission"] == admission
    assert set(sampler.current("RayJob")) == set(jobs) - {first, second}
    assert operator.running()
