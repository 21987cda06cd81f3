"""The operator killed with SIGKILL in the middle of admitting, then started again: usage is
the sum of the admitted Workloads and nothing is admitted twice.

This module runs its own operator process (so it can be killed) on namespaces the shared
in-process operator does not watch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.queue.conftest import (
    OperatorProcess,
    Quota,
    gpu_rayjob,
    gpus_admitted,
    is_admitted,
    workload_of,
)
from tests.integration.ray.kubehelpers import Kube, wait_for

PREFIX = "qk"


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


def admitted_gpus(kube: Kube, names: list[str]) -> dict[str, int]:
    out = {}
    for name in names:
        wl = workload_of(kube, "RayJob", name)
        if wl is not None and is_admitted(wl):
            out[name] = gpus_admitted(wl)
    return out


@pytest.fixture
def operator_process(control_plane: Any, crds_installed: None) -> Iterator[OperatorProcess]:
    process = OperatorProcess(str(control_plane.kubeconfig), PREFIX)
    try:
        yield process
    finally:
        process.kill()


def test_sigkill_mid_admission_loses_nothing_and_admits_nothing_twice(
    operator_process: OperatorProcess, kube: Kube, quota: Quota
) -> None:
    cq = quota.a100_team_queue(8)
    names = [f"job-{i}" for i in range(6)]
    for name in names:
        kube.apply(gpu_rayjob(name, "team", workers=1, gpus_per_worker=2))  # 4 of 6 fit
    operator_process.start()
    wait_for("a first admission", lambda: admitted_gpus(kube, names), timeout_s=120)
    operator_process.kill()
    before = {n: workload_of(kube, "RayJob", n) for n in names}
    admitted_before = {n: wl["status"]["admission"] for n, wl in before.items() if wl and is_admitted(wl)}

    operator_process.start()
    settled = wait_for(
        "4 jobs admitted after the restart",
        lambda: len(a := admitted_gpus(kube, names)) == 4 and a,
        timeout_s=180,
    )
    assert sum(settled.values()) == 8  # never more than the queue holds
    for name, admission in admitted_before.items():
        # Admitted before the kill: the same admission, not a second one.
        assert name in settled
        after = workload_of(kube, "RayJob", name)
        assert after is not None and after["status"]["admission"] == admission
    status = wait_for(
        "the ClusterQueue's usage",
        lambda: (
            (cqs := kube.get("clusterqueue.rayquota.io", cq))
            and (cqs.get("status") or {}).get("admittedWorkloads") == 4
            and cqs["status"]
        ),
        timeout_s=60,
    )
    usage = {
        r["name"]: r["total"]
        for f in status["flavorsUsage"]
        for r in f["resources"]
        if f["name"] == quota.name("a100")
    }
    assert usage["nvidia.com/gpu"] == "8"

    def suspended() -> dict[str, bool]:
        return {name: (kube.get("rayjob", name) or {})["spec"]["suspend"] for name in names}

    # An admitted RayJob is let go once the cache shows its recorded admission: a moment later.
    wanted = {name: name not in settled for name in names}
    wait_for("the admitted RayJobs unsuspended, the others not", lambda: suspended() == wanted, timeout_s=30)
