"""A running RayJob's status polls of a dashboard that does not answer well.

Each poll is one request: the next poll is the retry. A retry inside the reconcile (with its
back-off) would hold one of the controller's workers while the RayJobs behind it wait.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from rayquota.operator.config import OperatorConfig
from tests.integration.ray.kubehelpers import Kube, wait_for
from tests.integration.ray.test_rayjob import rayjob
from tests.loopback_server import ThreadedLoopbackServer

pytestmark = pytest.mark.ray

# Requests of one poll come within this of each other; polls are JOB_STATUS_POLL_S (3 s) apart.
SAME_POLL_S = 1.0


class FailingDashboard(ThreadedLoopbackServer):
    """A loopback HTTP server that answers 503 to everything and records when job status was asked."""

    def __init__(self) -> None:
        self.status_requests: list[float] = []
        lock = threading.Lock()
        recorded = self.status_requests

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                if self.path.startswith("/api/jobs/") and self.path.rstrip("/") != "/api/jobs":
                    with lock:
                        recorded.append(time.monotonic())
                body = b"overloaded"
                self.send_response(503)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *_args: Any) -> None:
                pass

        super().__init__(Handler)

    def polls(self) -> list[list[float]]:
        """The status requests grouped by poll (requests closer than SAME_POLL_S together)."""
        groups: list[list[float]] = []
        for at in list(self.status_requests):
            if groups and at - groups[-1][-1] < SAME_POLL_S:
                groups[-1].append(at)
            else:
                groups.append([at])
        return groups


@pytest.fixture
def failing_dashboard(
    control_plane: Any, namespace: str, ray_operator: OperatorConfig, dashboard_map_file: Path
) -> Iterator[FailingDashboard]:
    with FailingDashboard() as dashboard:
        mapping = json.loads(dashboard_map_file.read_text() or "{}")
        mapping[f"{namespace}/*"] = dashboard.url
        dashboard_map_file.write_text(json.dumps(mapping))
        try:
            yield dashboard
        finally:
            mapping = json.loads(dashboard_map_file.read_text() or "{}")
            mapping.pop(f"{namespace}/*", None)
            dashboard_map_file.write_text(json.dumps(mapping))


def test_a_failed_status_poll_is_one_request(
    control_plane: Any, namespace: str, failing_dashboard: FailingDashboard
) -> None:
    kube = Kube(control_plane, namespace)
    kube.apply(rayjob("unanswered", "python -c 'print(1)'", submissionMode="HTTPMode"))
    wait_for("five status polls", lambda: len(failing_dashboard.polls()) >= 5, timeout_s=120)
    # The first group may hold several reconciles' checks (the step into Running and the echo
    # of its status write each look); the timed polls after it are what a running job costs.
    polls = failing_dashboard.polls()[1:]
    assert all(len(requests) == 1 for requests in polls), (
        f"requests per timed status poll: {[len(r) for r in polls]} (a retry inside the reconcile)"
    )
    status = (kube.get("rayjob", "unanswered") or {}).get("status") or {}
    # Still Running: the failed checks are recorded, and the RayJob waits for the next poll.
    assert status.get("jobDeploymentStatus") == "Running", status
    assert "HTTP 503" in str(status.get("message")), status
