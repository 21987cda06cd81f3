"""The API server stopped for 30 s and started again (same port, certificates and etcd) while
RayJobs are being admitted and a RayService upgrade waits for quota: the operator rides it out
and admissions continue; nothing is admitted twice, nothing lost, and the gate's invariants
hold at every state the API server stored (watched through a second API server on the same
etcd, which stays up). Then, at rest, the API server restarted once more: every informer
relists, and that is no storm of requests (`relist_at_rest`)."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable

from rayquota.localcluster.cluster import LocalCluster
from tests.fake_ray_dashboard import FakeRayDashboard
from tests.gate_sampler import GateSampler
from tests.integration.faults.objects import (
    admitted,
    gpu_rayjob,
    gpu_service,
    gpus_admitted,
    new_head_image,
    role_cluster,
    service_ready,
    upgrade_waits_for_quota,
    waiting,
    workload,
)
from tests.integration.faults.support import (
    WRITES,
    ObserverApiServer,
    OperatorRequests,
    admitted_once,
)
from tests.integration.queue.conftest import Quota
from tests.integration.ray.kubehelpers import Kube
from tests.operator_process import OperatorProcess
from tests.polling import holds, wait_for

OUTAGE_S = 30
# From the API server's /readyz until every informer has listed again: the backoff an outage
# built up (up to 30 s a watch) must not keep the operator blind once the server is back.
RELIST_BOUND_S = 10


def test_api_server_down_30s_while_rayjobs_are_admitted_and_an_upgrade_waits_for_quota(
    faults_cluster: LocalCluster,
    observer: ObserverApiServer,
    kube: Kube,
    quota: Quota,
    gate_sampler: Callable[..., GateSampler],
    start_operator: Callable[..., OperatorProcess],
    fake_dashboard: FakeRayDashboard,
) -> None:
    cq = quota.a100_team_queue(8)
    sampler = gate_sampler(cq, kubeconfig=observer.kubeconfig)
    requests_log = OperatorRequests(faults_cluster)
    operator = start_operator()
    operator.wait_reconciling()
    informers = int(re.findall(r"operator ready: (\d+) informers synced", operator.output())[0])

    service = gpu_service("svc", "team")  # 2 GPUs
    kube.apply(service)
    wait_for("the RayService Ready", lambda: service_ready(sampler, "svc"), timeout_s=180)
    first = role_cluster(sampler, "svc", "active")
    jobs = [f"job-{i}" for i in range(6)]
    for name in jobs[:3]:
        kube.apply(gpu_rayjob(name, "team", workers=1, gpus_per_worker=2))
    wait_for("three RayJobs admitted", lambda: all(admitted(sampler, "RayJob", j) for j in jobs[:3]), 120)
    # The queue is full (8 of 8): the upgrade's new cluster and three more RayJobs wait.
    kube.patch("rayservice", "svc", new_head_image(service))
    wait_for("the upgrade waiting for quota", lambda: upgrade_waits_for_quota(sampler, "svc"), 120)
    for name in jobs[3:]:
        kube.apply(gpu_rayjob(name, "team", workers=1, gpus_per_worker=2))
    wait_for("three RayJobs waiting", lambda: all(waiting(sampler, "RayJob", j) for j in jobs[3:]), 120)
    assert gpus_admitted(sampler) == 8

    # A running job is deleted: its quota is being handed on when the API server goes away. The
    # operator stops its Ray job before it lets the RayJob go; the stop is held until the API
    # server is down, so the finalizer can only go after the outage.
    fake_dashboard.hold_stops()
    stops_before = fake_dashboard.stops_asked
    kube.kubectl("delete", "rayjob", "job-0", "--wait=false")
    wait_for("the operator stopping job-0's Ray job", lambda: fake_dashboard.stops_asked > stops_before, 60)
    faults_cluster.stop_component("kube-apiserver")
    down_at = time.time()
    fake_dashboard.release_stops()
    holds("the operator running while the API server is down", operator.running, seconds=OUTAGE_S)
    started_at = time.time()
    faults_cluster.start_component("kube-apiserver")
    ready_at = time.time()

    def handed_on() -> list[str]:
        """Who has job-0's 2 GPUs now: its Workload gone, the queue full again."""
        if workload(sampler, "RayJob", "job-0") is not None or gpus_admitted(sampler) != 8:
            return []
        return [n for n, yes in (("job-3", admitted(sampler, "RayJob", "job-3")),
                                 ("the upgrade", _upgrade_admitted(sampler))) if yes]  # fmt: skip

    given = wait_for("job-0's quota handed on", handed_on, timeout_s=180)
    handed_on_s = time.time() - ready_at
    after = requests_log.since(down_at)  # none of them was answered before the restart
    lists = sorted(r.at for r in after if r.verb == "list" and r.ok)
    relisted_s = lists[informers - 1] - ready_at if len(lists) >= informers else float("inf")
    finalized = [
        r.at for r in after if r.verb == "patch" and r.resource == "rayjobs" and r.name == "job-0" and r.ok
    ]
    finalized_s = min(finalized, default=float("inf")) - ready_at
    print(
        f"\nFAULT-FIGURES API server down {OUTAGE_S}s, /readyz {ready_at - started_at:.1f}s after its start; "
        f"after /readyz: the operator's {informers} "
        f"informers listed again in {relisted_s:.1f}s, job-0's finalizer removed in {finalized_s:.1f}s, "
        f"its quota handed on ({', '.join(given)}) in {handed_on_s:.1f}s (garbage collector included)"
    )
    # The operator is back within seconds: its watches do not wait out the outage's backoff.
    assert relisted_s < RELIST_BOUND_S, f"the informers listed again only {relisted_s:.1f}s after /readyz"
    assert finalized_s < RELIST_BOUND_S, f"job-0's finalizer went only {finalized_s:.1f}s after /readyz"

    # Admissions go on as before: job-1's quota goes to job-3; the upgrade completes, the old
    # cluster goes and the service's admission shrinks back, so job-4 gets its 2 GPUs.
    kube.kubectl("delete", "rayjob", "job-1", "--wait=false")
    wait_for(
        "job-3 and job-4 admitted, the new cluster promoted",
        lambda: (
            admitted(sampler, "RayJob", "job-3")
            and admitted(sampler, "RayJob", "job-4")
            and role_cluster(sampler, "svc", "pending") is None
            and role_cluster(sampler, "svc", "active") not in (None, first)
        ),
        timeout_s=180,
    )
    assert waiting(sampler, "RayJob", "job-5")
    sampler.sync()
    assert admitted_once(sampler) == {}
    # Nothing lost: every object the test did not delete is there.
    assert set(sampler.current("RayJob")) >= {"job-2", "job-3", "job-4", "job-5"}
    assert "svc" in sampler.current("RayService")
    assert operator.running()

    relist_at_rest(faults_cluster, sampler, requests_log, informers, admitted_jobs=3)


def relist_at_rest(
    cluster: LocalCluster,
    sampler: GateSampler,
    requests_log: OperatorRequests,
    informers: int,
    admitted_jobs: int,
) -> None:
    """The API server restarted (1 s down) under the operator at rest: every watch is cut, and
    resuming from the last resourceVersion is refused (a restarted server's watch cache starts at
    the present), so every informer lists again. The relist brings objects the operator already
    has: it must not turn into a storm of reconciles and writes. The operator's requests are
    counted from the API server's audit log (its user agent is rayquota/<version>)."""
    wait_for(
        "the admitted RayJobs' Ray jobs running",
        lambda: (
            sum(
                (j.get("status") or {}).get("jobStatus") == "RUNNING"  # submitted, and Ray says so
                for j in sampler.current("RayJob").values()
            )
            == admitted_jobs
        ),
        timeout_s=120,
    )
    wait_for("the operator at rest", lambda: requests_log.quiet(WRITES, seconds=5), timeout_s=120)
    sampler.sync()
    versions_before = {kind: _versions(sampler, kind) for kind in ("Workload", "RayCluster", "RayJob")}

    restart_at = time.time()
    cluster.restart_component("kube-apiserver", down_s=1)
    wait_for(
        f"the operator's {informers} informers to list again",
        lambda: sum(1 for r in requests_log.since(restart_at) if r.verb == "list" and r.ok) >= informers,
        timeout_s=120,
    )
    wait_for("the operator quiet again", lambda: requests_log.quiet(None, seconds=5), timeout_s=120)
    requests = requests_log.since(restart_at)
    by_answer = Counter(f"{r.verb} {r.code}" for r in requests)
    writes = [(r.verb, r.resource, r.name) for r in requests if r.verb in WRITES]
    print(
        f"\nFAULT-FIGURES relist after an API server restart (1 s down) at rest: {informers} informers, "
        f"{len(requests)} requests ({dict(by_answer)}), writes {writes}"
    )
    # Each informer lists once and watches again once (its resumed watch refused with 410, then
    # the new one); what the restarting server turned away (503 or 429 while its storage
    # initialises) is paced by its Retry-After; nothing at rest is written again or read one by one.
    assert sum(1 for r in requests if r.verb == "list" and r.ok) == informers, by_answer
    assert sum(1 for r in requests if r.verb == "watch" and r.ok) <= 2 * informers, by_answer
    assert len(requests) <= 6 * informers, by_answer
    assert writes == [], writes
    assert sum(1 for r in requests if r.verb == "get") <= 5, by_answer
    sampler.sync()
    for kind, before in versions_before.items():
        assert _versions(sampler, kind) == before, f"{kind}s were written after the relist"


def _versions(sampler: GateSampler, kind: str) -> dict[str, str]:
    return {name: str(obj["metadata"]["resourceVersion"]) for name, obj in sampler.current(kind).items()}


def _upgrade_admitted(sampler: GateSampler) -> bool:
    pending = role_cluster(sampler, "svc", "pending")
    if pending is None:
        return False
    cluster = sampler.current("RayCluster").get(pending) or {}
    return (cluster.get("spec") or {}).get("suspend") is False
