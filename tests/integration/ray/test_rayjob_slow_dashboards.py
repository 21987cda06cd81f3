"""A RayJob whose dashboard answers late, or whose dashboard's name resolves late, holds no
reconcile worker: its calls run off the workers and their answers re-queue it."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from rayquota.operator.config import OperatorConfig
from tests.integration.ray.kubehelpers import Kube, wait_for
from tests.integration.ray.test_rayjob import job_state, rayjob
from tests.loopback_server import ThreadedLoopbackServer

pytestmark = pytest.mark.ray

ANSWER_AFTER_S = 3.0
SLOW_RECONCILE_S = 2.5  # a bucket of rayquota_controller_reconcile_seconds
UNRESOLVABLE = "head-svc.unresolvable.test"


def slow_rayjob_reconciles(over_s: float = SLOW_RECONCILE_S) -> float:
    """How many `rayjob` reconciles in this process took over ``over_s`` (a bucket's bound) so far.

    The count and the bucket come from one collection: the histogram's count is the sum of the
    buckets it read (two separate reads could see reconciles of this process's other operators
    finish in between, and go negative)."""
    count, fast = 0.0, None
    for family in REGISTRY.collect():
        if family.name != "rayquota_controller_reconcile_seconds":
            continue
        for sample in family.samples:
            if sample.labels.get("controller") != "rayjob":
                continue
            if sample.name.endswith("_count"):
                count = sample.value
            elif sample.name.endswith("_bucket") and sample.labels.get("le") == str(over_s):
                fast = sample.value
    assert fast is not None or not count, f"no histogram bucket at {over_s}s"
    return count - (fast or 0.0)


class SlowDashboard(ThreadedLoopbackServer):
    """A loopback Ray dashboard that answers every job request after `answer_after_s`: a job is
    unknown (404) until submitted, then SUCCEEDED."""

    def __init__(self, answer_after_s: float = ANSWER_AFTER_S, hold: threading.Event | None = None) -> None:
        """``hold``: while given and not set (``release``), a submitted job is RUNNING, not yet SUCCEEDED."""
        self.release = hold if hold is not None else threading.Event()
        self.submitted: set[str] = set()
        self.requests: list[str] = []
        lock = threading.Lock()
        dashboard = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                time.sleep(answer_after_s)  # the dashboard's own slowness, not a test's wait
                job_id = self.path.rstrip("/").rsplit("/", 1)[-1]
                with lock:
                    dashboard.requests.append(f"GET {job_id}")
                    known = job_id in dashboard.submitted
                if not known:
                    self._send(404, {"detail": f"Job {job_id} does not exist"})
                    return
                status = "RUNNING" if hold is not None and not hold.is_set() else "SUCCEEDED"
                info = {"submission_id": job_id, "job_id": job_id, "status": status, "start_time": 1}
                self._send(200, {**info, "entrypoint": "python -c 'print(1)'", "end_time": 2})

            def do_POST(self) -> None:
                time.sleep(answer_after_s)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with lock:
                    dashboard.requests.append(f"POST {body.get('submission_id')}")
                    dashboard.submitted.add(str(body.get("submission_id")))
                self._send(200, {"submission_id": body.get("submission_id")})

            def log_message(self, *_args: Any) -> None:
                pass

        super().__init__(Handler)


def route_namespace(map_file: Path, namespace: str, url: str | None) -> None:
    mapping = json.loads(map_file.read_text() or "{}")
    if url is None:
        mapping.pop(f"{namespace}/*", None)
    else:
        mapping[f"{namespace}/*"] = url
    map_file.write_text(json.dumps(mapping))


@pytest.fixture
def slow_dashboard(
    control_plane: Any, namespace: str, ray_operator: OperatorConfig, dashboard_map_file: Path
) -> Iterator[SlowDashboard]:
    with SlowDashboard() as dashboard:
        route_namespace(dashboard_map_file, namespace, dashboard.url)
        try:
            yield dashboard
        finally:
            route_namespace(dashboard_map_file, namespace, None)


def test_a_slow_dashboard_holds_no_reconcile_worker_and_its_late_answers_reach_the_status(
    control_plane: Any, namespace: str, slow_dashboard: SlowDashboard
) -> None:
    kube = Kube(control_plane, namespace)
    slow_before = slow_rayjob_reconciles()
    kube.apply(rayjob("late", "python -c 'print(1)'", submissionMode="HTTPMode"))
    # Status poll (404, 3 s) and submission (3 s), then a poll that says SUCCEEDED (3 s).
    status = wait_for(
        "the late answers to reach the RayJob's status",
        lambda: (s := job_state(kube, "late")).get("jobDeploymentStatus") == "Complete" and s,
        timeout_s=120,
    )
    assert status["jobStatus"] == "SUCCEEDED", status
    job_id = status["jobId"]
    assert f"POST {job_id}" in slow_dashboard.requests and f"GET {job_id}" in slow_dashboard.requests
    slow = slow_rayjob_reconciles() - slow_before
    assert slow == 0, f"{slow:g} rayjob reconciles took {SLOW_RECONCILE_S}s or more (waited on the dashboard)"


@pytest.fixture
def unresolvable_dashboard(
    control_plane: Any,
    namespace: str,
    ray_operator: OperatorConfig,
    dashboard_map_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[list[float]]:
    """This namespace's dashboards are at a name the system resolver takes 5 s to refuse (as this
    machine's does at times for a `*-head-svc` name that does not exist). Other names resolve as
    before. Yields the times the name was looked up."""
    lookups: list[float] = []
    real_getaddrinfo: Callable[..., Any] = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == UNRESOLVABLE:
            lookups.append(time.monotonic())
            time.sleep(5.0)  # the stalled resolver this stands for
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    route_namespace(dashboard_map_file, namespace, f"http://{UNRESOLVABLE}:8265")
    try:
        yield lookups
    finally:
        route_namespace(dashboard_map_file, namespace, None)


def test_an_unresolvable_dashboard_holds_no_reconcile_worker(
    control_plane: Any, namespace: str, unresolvable_dashboard: list[float]
) -> None:
    kube = Kube(control_plane, namespace)
    slow_before = slow_rayjob_reconciles()
    kube.apply(rayjob("nameless", "python -c 'print(1)'", submissionMode="HTTPMode"))
    status = wait_for(
        "the failed lookup to reach the RayJob's status",
        lambda: "unreachable" in str((s := job_state(kube, "nameless")).get("message")) and s,
        timeout_s=120,
    )
    assert status["jobDeploymentStatus"] == "Running", status
    wait_for("a second status poll", lambda: len(unresolvable_dashboard) >= 2, timeout_s=60)
    slow = slow_rayjob_reconciles() - slow_before
    assert slow == 0, f"{slow:g} rayjob reconciles took {SLOW_RECONCILE_S}s or more (waited on a name lookup)"
    kube.kubectl("delete", "rayjob", "nameless", "--wait=false")
    wait_for("the RayJob deleted", lambda: kube.get("rayjob", "nameless") is None, timeout_s=60)
    slow = slow_rayjob_reconciles() - slow_before
    assert slow == 0, f"{slow:g} rayjob reconciles took {SLOW_RECONCILE_S}s or more while deleting it"
