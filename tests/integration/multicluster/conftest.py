"""Three real local control planes for MultiKueue: a manager and two workers (``rayquota
multicluster up`` with a per-run prefix ``mk-<pid>``), one operator process on each (the
manager's with MultiKueue, ``workerLostTimeout`` short enough for a test), scoped to ``mk-*``
namespaces. Each test gets its own namespace in all three clusters and its own quota objects."""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.multicluster import CHECK_NAME, MultiCluster
from tests.integration.queue.conftest import OperatorProcess, Quota
from tests.integration.ray.kubehelpers import Kube, condition
from tests.polling import wait_for

PREFIX = "mk"
# One xdist group (tests/scheduling.py): the fleet of three control planes is started once per run.
DISTRIBUTE_AS_ONE_GROUP = True
WORKER_LOST_TIMEOUT_S = 20
MANAGER_ENV = {
    "RAYQUOTA_MULTIKUEUE": "true",
    "RAYQUOTA_MULTIKUEUE_NAMESPACE": "rayquota-system",
    "RAYQUOTA_MULTIKUEUE_WORKER_LOST_TIMEOUT": str(WORKER_LOST_TIMEOUT_S),
    # The manager serves its admission webhooks (on 127.0.0.1): they default spec.managedBy.
    "RAYQUOTA_WEBHOOK_PORT": "0",
}


class PeakMemory:
    """The peak summed resident memory of a set of process trees, sampled every second."""

    def __init__(self) -> None:
        self.pids: list[int] = []
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-memory", daemon=True)

    def start(self) -> PeakMemory:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.peak_bytes = max(self.peak_bytes, sum(_rss(pid) for pid in list(self.pids)))


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class VerboseOperator(OperatorProcess):
    """With RAYQUOTA_TEST_VERBOSE set, the operators log at DEBUG level (failures are read from
    their logs, kept in a temporary directory)."""

    def start(self) -> None:
        if os.environ.get("RAYQUOTA_TEST_VERBOSE"):
            self.webhook_flags = [*self.webhook_flags, "--verbose"]
        super().start()


@dataclass
class Fleet:
    set: MultiCluster
    manager: LocalCluster
    workers: dict[str, LocalCluster]  # worker1, worker2
    operators: dict[str, OperatorProcess] = field(default_factory=dict)
    logs: Path = Path()
    memory: PeakMemory | None = None

    def clusters(self) -> dict[str, LocalCluster]:
        return {"manager": self.manager, **self.workers}

    def kubeconfigs(self) -> dict[str, str]:
        return {name: str(c.kubeconfig) for name, c in self.clusters().items()}

    def watch_memory(self) -> None:
        assert self.memory is not None
        pids = [int(str(info["pid"])) for c in self.clusters().values() for info in c.processes().values()]
        pids += [op.proc.pid for op in self.operators.values() if op.proc is not None]
        self.memory.pids = pids


@pytest.fixture(scope="package")
def fleet() -> Iterator[Fleet]:
    # RAYQUOTA_TEST_FLEET names a fleet to reuse (`rayquota multicluster up --prefix mk-...`),
    # left running afterwards; by default each run has its own.
    reuse = os.environ.get("RAYQUOTA_TEST_FLEET")
    fleet_set = MultiCluster(prefix=reuse or f"{PREFIX}-{os.getpid()}")
    logs = Path(tempfile.mkdtemp(prefix="rq-mk-logs-"))
    fleet = Fleet(
        fleet_set,
        fleet_set.manager,
        {MultiCluster.worker_name(w): w for w in fleet_set.worker_clusters},
        logs=logs,
        memory=PeakMemory().start(),
    )
    try:
        fleet_set.up(log=lambda _msg: None)
        for name, cluster in fleet.clusters().items():
            env = MANAGER_ENV if name == "manager" else {}
            operator = VerboseOperator(str(cluster.kubeconfig), PREFIX, log=logs / f"{name}.log", **env)
            operator.start()
            fleet.operators[name] = operator
        fleet.watch_memory()
        wait_for(
            "the manager connected to both workers and its check Active",
            lambda: (
                all(_active(fleet.manager, "multikueueclusters.rayquota.io", w) for w in fleet.workers)
                and _active(fleet.manager, "admissionchecks.rayquota.io", CHECK_NAME)
            ),
            timeout_s=120,
        )
        yield fleet
    finally:
        running = [
            op.proc for op in fleet.operators.values() if op.proc is not None and op.proc.poll() is None
        ]
        for proc in running:  # all at once: each takes seconds to stop
            proc.send_signal(signal.SIGINT)
        for proc in running:
            proc.wait(timeout=60)
        if fleet.memory is not None:
            fleet.memory.close()
            peak = fleet.memory.peak_bytes / 2**30
            print(f"\nmulticluster: peak memory of 3 control planes + 3 operators: {peak:.2f} GiB")
        if not reuse:
            fleet_set.down(purge=True)


@contextmanager
def manager_configured(fleet: Fleet, tag: str, **env: str) -> Iterator[None]:
    """The fleet's manager operator restarted with ``env`` over its own (a dispatcher, say) for
    the block, and with its own settings again afterwards: the dispatcher is the manager's, one
    for every workload, so a test of another one has the manager to itself while it runs."""
    _restart_manager(fleet, f"manager-{tag}", {**MANAGER_ENV, **env})
    try:
        yield
    finally:
        _restart_manager(fleet, f"manager-after-{tag}", MANAGER_ENV)


def _restart_manager(fleet: Fleet, log_name: str, env: dict[str, str]) -> None:
    fleet.operators["manager"].interrupt()
    log = fleet.logs / f"{log_name}.log"
    operator = VerboseOperator(str(fleet.manager.kubeconfig), PREFIX, log=log, **env)
    operator.start()
    fleet.operators["manager"] = operator
    fleet.watch_memory()
    # The MultiKueueClusters still say Active from the operator before: its log says when this
    # one has connected to the workers.
    wait_for(
        f"the manager's operator ({log_name}) connected to both workers",
        lambda: all(
            f"multikueue: worker {name} connected" in log.read_text(errors="replace")
            for name in fleet.workers
        ),
        timeout_s=120,
    )


def _active(cluster: LocalCluster, resource: str, name: str) -> bool:
    got = cluster.kubectl("get", resource, name, "-o", "json", check=False)
    if got.returncode != 0:
        return False
    return (condition(json.loads(got.stdout), "Active") or {}).get("status") == "True"


@dataclass
class Side:
    """One cluster of the fleet as a test sees it: its kubectl in the test's namespace, and its
    quota objects (cluster-scoped ones named after the namespace)."""

    cluster: LocalCluster
    kube: Kube
    quota: Quota


@pytest.fixture
def sides(fleet: Fleet, request: pytest.FixtureRequest) -> Iterator[dict[str, Side]]:
    """The test's namespace, made in all three clusters; name -> Side."""
    stem = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:30].strip("-")
    namespace = f"{PREFIX}-{stem}-{secrets.token_hex(3)}"
    made: dict[str, Side] = {}
    try:
        for name, cluster in fleet.clusters().items():
            cluster.kubectl("create", "namespace", namespace)
            made[name] = Side(cluster, Kube(cluster, namespace), Quota(cluster, namespace))
        for side in made.values():
            # The controller-manager makes it; after the failover test restarted a worker's API
            # server, its watches come back through their backoff, slower on a loaded machine
            # (60 s were once not enough with three control planes beside a benchmark).
            wait_for(
                f"{side.cluster.name}: the default service account of {namespace}",
                lambda side=side: side.kube.get("serviceaccount", "default") is not None,
                timeout_s=180,
            )
        yield made
    finally:
        for side in made.values():
            side.quota.delete_all()
            side.cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def manager_queue(side: Side, gpus: int) -> str:
    """The manager's ClusterQueue ``team`` (behind LocalQueue ``team``) dispatching to the workers:
    a flavor with no node labels (nothing runs in the manager) and the MultiKueue check."""
    flavor = side.quota.apply("ResourceFlavor", "fleet", {"spec": {}})
    cq = side.quota.cluster_queue("team", {flavor: gpus}, admissionChecks=[CHECK_NAME])
    side.quota.local_queue("team", cq)
    return cq


def worker_queue(side: Side, gpus: int) -> str:
    """A worker's ClusterQueue ``team`` of A100 GPUs behind LocalQueue ``team``."""
    cq = side.quota.cluster_queue("team", {side.quota.flavor("a100", "a100"): gpus})
    side.quota.local_queue("team", cq)
    return cq


def dispatched(job: dict[str, Any]) -> dict[str, Any]:
    """An object as a MultiKueue user writes it: ``spec.managedBy`` names MultiKueue."""
    job["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    return job


def manager_workload(side: Side, kind: str, name: str) -> dict[str, Any] | None:
    from tests.integration.queue.conftest import workload_of

    return workload_of(side.kube, kind, name)


def check_state(workload: dict[str, Any] | None) -> dict[str, Any]:
    for entry in ((workload or {}).get("status") or {}).get("admissionChecks") or ():
        if entry.get("name") == CHECK_NAME:
            return dict(entry)
    return {}


def ready_in(side: Side, kind: str, name: str, timeout_s: float = 90) -> str:
    """Wait until the manager's Workload of the object is Ready in a worker; that worker."""

    def worker() -> str | None:
        wl = manager_workload(side, kind, name)
        if check_state(wl).get("state") != "Ready":
            return None
        return str(((wl or {}).get("status") or {}).get("clusterName") or "") or None

    return wait_for(f"{kind} {name} admitted in a worker", worker, timeout_s=timeout_s)


def wait_or_show(what: str, probe: Callable[[], Any], show: Callable[[], Any], timeout_s: float = 60) -> Any:
    """``wait_for``, failing with what ``show`` says about the objects involved."""
    try:
        return wait_for(what, probe, timeout_s=timeout_s)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{json.dumps(show(), indent=1, default=str)[:20000]}") from None


def apply_yaml(cluster: LocalCluster, docs: list[dict[str, Any]]) -> None:
    cluster.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(docs))
