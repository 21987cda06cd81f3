"""The API server restarted under an operator at rest: every watch is cut, and resuming from
the last resourceVersion is refused (a restarted server's watch cache starts at the present),
so every informer lists again. The relist brings objects the operator already has: it must not
turn into a storm of reconciles and writes. The operator's requests are counted from the API
server's audit log (its user agent is rayquota/<version>)."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable

from rayquota.localcluster.cluster import LocalCluster
from tests.gate_sampler import GateSampler
from tests.integration.faults.objects import admitted, gpu_rayjob, gpu_service, service_ready, waiting
from tests.integration.faults.support import (
    WRITES,
    ObserverApiServer,
    OperatorRequests,
    admitted_once,
)
from tests.integration.queue.conftest import Quota
from tests.integration.ray.kubehelpers import Kube
from tests.operator_process import OperatorProcess
from tests.polling import wait_for


def test_watches_cut_every_informer_relists_once_and_nothing_is_written_again(
    faults_cluster: LocalCluster,
    observer: ObserverApiServer,
    kube: Kube,
    quota: Quota,
    gate_sampler: Callable[..., GateSampler],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    cq = quota.a100_team_queue(8)
    sampler = gate_sampler(cq, kubeconfig=observer.kubeconfig)
    requests_log = OperatorRequests(faults_cluster)
    operator = start_operator()
    operator.wait_reconciling()
    informers = int(re.findall(r"operator ready: (\d+) informers synced", operator.output())[0])
    kube.apply(gpu_service("svc", "team"))
    jobs = [f"job-{i}" for i in range(5)]
    for name in jobs:
        kube.apply(gpu_rayjob(name, "team", workers=1, gpus_per_worker=2))  # 3 of 5 fit beside svc
    wait_for("the RayService Ready", lambda: service_ready(sampler, "svc"), timeout_s=180)
    wait_for("three RayJobs admitted", lambda: sum(admitted(sampler, "RayJob", j) for j in jobs) == 3, 120)
    wait_for("two RayJobs waiting", lambda: sum(waiting(sampler, "RayJob", j) for j in jobs) == 2, 120)
    # At rest: the admitted jobs' Ray jobs running, and the operator writing nothing for 5 s.
    wait_for(
        "the admitted RayJobs running",
        lambda: (
            sum(
                (j.get("status") or {}).get("jobStatus") == "RUNNING"  # submitted, and Ray says so
                for j in sampler.current("RayJob").values()
            )
            == 3
        ),
        timeout_s=120,
    )
    wait_for("the operator at rest", lambda: requests_log.quiet(WRITES, seconds=5), timeout_s=120)
    sampler.sync()
    versions_before = {kind: dict(_versions(sampler, kind)) for kind in ("Workload", "RayCluster", "RayJob")}

    restart_at = time.time()
    faults_cluster.restart_component("kube-apiserver", down_s=1)
    relisted = wait_for(
        f"the operator's {informers} informers to list again",
        lambda: (
            (n := sum(1 for r in requests_log.since(restart_at) if r.verb == "list" and r.ok)) >= informers
            and n
        ),
        timeout_s=120,
    )
    wait_for("the operator quiet again", lambda: requests_log.quiet(None, seconds=5), timeout_s=120)
    requests = requests_log.since(restart_at)
    by_verb = Counter(r.verb for r in requests)
    by_answer = Counter(f"{r.verb} {r.code}" for r in requests)
    writes = [(r.verb, r.resource, r.name) for r in requests if r.verb in WRITES]
    print(
        f"\nFAULT-FIGURES relist after an API server restart: {informers} informers, "
        f"{len(requests)} requests ({dict(by_answer)}), writes {writes}"
    )
    assert relisted >= informers
    # Each informer lists once and watches again once; the attempts the restarting server turned
    # away (503 or 429 while its storage initialises, then 410 for the old resourceVersion) are
    # paced by its Retry-After; nothing at rest is written again, nothing read one by one.
    listed = sum(1 for r in requests if r.verb == "list" and r.ok)
    watching = sum(1 for r in requests if r.verb == "watch" and r.ok)
    assert listed == informers, by_answer
    assert watching <= 2 * informers, by_answer
    assert len(requests) <= 6 * informers, by_answer
    assert writes == [], writes
    assert by_verb["get"] <= 5, by_answer

    sampler.sync()
    for kind, before in versions_before.items():
        assert dict(_versions(sampler, kind)) == before, f"{kind}s were written after the relist"
    assert admitted_once(sampler) == {}
    assert operator.running()


def _versions(sampler: GateSampler, kind: str) -> list[tuple[str, str]]:
    return [(name, str(obj["metadata"]["resourceVersion"])) for name, obj in sampler.current(kind).items()]
