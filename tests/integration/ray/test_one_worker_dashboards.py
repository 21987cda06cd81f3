"""With one RayJob worker, dashboards that never answer or never resolve cost only their own
RayJobs' progress: a RayJob on a real Ray head beside them still runs to its end at once.

The operator here has `workers=1` and a dashboard timeout of 30 s, so a single reconcile that
waited for one of those dashboards would hold the only worker for 30 s (a name lookup, 8 s), and
the real job behind it would miss its deadline many times over.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rayquota.operator.config import OperatorConfig
from tests.integration.ray.kubehelpers import Kube, wait_for
from tests.integration.ray.rayhead import RayHead
from tests.integration.ray.test_rayjob import CLUSTER_SPEC, job_state, rayjob
from tests.integration.ray.test_rayjob_slow_dashboards import slow_rayjob_reconciles
from tests.operator_thread import operator_thread

pytestmark = pytest.mark.ray

PREFIX = "rayw1"  # not under the package operator's `ray-*`: this module's operator alone
UNRESOLVABLE = "head-svc.never-resolves.test"
DASHBOARD_TIMEOUT_S = 30.0
LOOKUP_STALL_S = 8.0
# A reconcile that waited on either took 8 s or more. The histogram is the process's (the
# package's operator reconciles here too): at this machine's load an ordinary reconcile can pass
# 2.5 s (clean-clone run cc12: 2 such, with no dashboard waited on), so the line is drawn at the
# 5 s bucket, below the shortest wait.
WAITED_S = 5.0
# A real job's whole life (its cluster, the submission, the run, the polls) on the shared head;
# a reconcile held by one silent dashboard alone would take 30 s.
REAL_JOB_DEADLINE_S = 45.0


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


class SilentDashboard:
    """A loopback port that accepts connections, reads nothing and never answers."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            self.accepted.append(conn)  # held open, never answered

    def __enter__(self) -> SilentDashboard:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._listener.close()
        for conn in self.accepted:
            conn.close()
        self._thread.join(timeout=10)


@pytest.fixture(scope="module")
def one_worker_operator(crds_installed: None, dashboard_map_file: Path) -> Iterator[OperatorConfig]:
    """Reads the package's map file: its keys are namespaces, and this operator watches only its own."""
    config = OperatorConfig(
        version="test-1",
        dashboard_resolver="local",
        dashboard_map_file=str(dashboard_map_file),
        dashboard_timeout_s=DASHBOARD_TIMEOUT_S,
        workers=1,
        queue_enabled=False,  # the package's operator may run beside it: one queue writer
    )
    with operator_thread(config, [f"{PREFIX}-*"]):
        yield config


@pytest.fixture
def stalled_lookups(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """UNRESOLVABLE takes LOOKUP_STALL_S to fail (as this machine's resolver does at times for a
    head name that does not exist); other names resolve as before. The times it was asked."""
    lookups: list[float] = []
    real_getaddrinfo: Callable[..., Any] = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == UNRESOLVABLE:
            lookups.append(time.monotonic())
            time.sleep(LOOKUP_STALL_S)  # the stalled resolver this stands for
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return lookups


def shared_cluster(name: str) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name}, "spec": CLUSTER_SPEC}


def job_on(cluster: str, name: str) -> dict[str, Any]:
    body = rayjob(
        name, "python -c 'print(1)'", submissionMode="HTTPMode", clusterSelector={"ray.io/cluster": cluster}
    )
    del body["spec"]["rayClusterSpec"]
    return body


def test_dashboards_that_never_answer_or_resolve_hold_back_only_their_own_rayjobs(
    control_plane: Any,
    namespace: str,
    one_worker_operator: OperatorConfig,
    dashboard_map_file: Path,
    ray_head: RayHead,
    stalled_lookups: list[float],
) -> None:
    kube = Kube(control_plane, namespace)
    with SilentDashboard() as silent:
        routes = {
            f"{namespace}/silent": silent.url,
            f"{namespace}/nameless": f"http://{UNRESOLVABLE}:8265",
            f"{namespace}/*": ray_head.dashboard_url,
        }
        # Shared with the package's other tests: this namespace's routes beside theirs.
        mapping = json.loads(dashboard_map_file.read_text() or "{}")
        dashboard_map_file.write_text(json.dumps({**mapping, **routes}))
        for cluster in ("silent", "nameless"):
            kube.apply(shared_cluster(cluster))
        for cluster in ("silent", "nameless"):
            wait_for(
                f"RayCluster {cluster} ready",
                lambda c=cluster: (kube.get("raycluster", c) or {}).get("status", {}).get("state") == "ready",
            )
        stuck = {"mute-1": "silent", "mute-2": "silent", "lost": "nameless"}
        for name, cluster in stuck.items():
            kube.apply(job_on(cluster, name))
        wait_for(
            "the stuck jobs' dashboard calls in flight",
            lambda: len(silent.accepted) >= 2 and len(stalled_lookups) >= 1,
            timeout_s=60,
        )
        slow_before = slow_rayjob_reconciles(WAITED_S)

        started = time.monotonic()
        kube.apply(rayjob("real", "python -c 'print(2)'", submissionMode="HTTPMode"))
        status = wait_for(
            "the real RayJob Complete",
            lambda: (s := job_state(kube, "real")).get("jobDeploymentStatus") in {"Complete", "Failed"} and s,
            timeout_s=REAL_JOB_DEADLINE_S,
            interval_s=0.2,
        )
        took = time.monotonic() - started
        assert status["jobStatus"] == "SUCCEEDED", status

        for name in stuck:
            left = job_state(kube, name)
            assert left.get("jobDeploymentStatus") == "Running" and not left.get("jobStatus"), (name, left)
        slow = slow_rayjob_reconciles(WAITED_S) - slow_before
        assert slow == 0, (
            f"{slow:g} rayjob reconciles took {WAITED_S}s or more (the real job took {took:.1f}s)"
        )
        for name in (*stuck, "real"):
            kube.kubectl("delete", "rayjob", name, "--wait=false")
        for name in stuck:  # their stops before deletion would wait on the same dashboards
            kube.patch("rayjob", name, {"metadata": {"finalizers": None}})
        wait_for("the RayJobs deleted", lambda: not kube.list("rayjob"), timeout_s=60)
    mapping = json.loads(dashboard_map_file.read_text() or "{}")
    dashboard_map_file.write_text(json.dumps({key: url for key, url in mapping.items() if key not in routes}))
