"""The dashboard as a user starts it: served by the operator (``rayquota run --dashboard-port``),
signed in with the link ``rayquota dashboard token --url`` prints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from rayquota.localcluster.cluster import LocalCluster
from rayquota.ports import free_port

RAYQUOTA = [sys.executable, "-m", "rayquota.cli"]


def _get(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_operator_serves_the_dashboard_and_the_token_link_signs_in(
    control_plane: LocalCluster, crds_installed: None
) -> None:
    env = dict(os.environ, KUBECONFIG=str(control_plane.kubeconfig))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    operator = subprocess.Popen(
        [
            *RAYQUOTA,
            "run",
            "-n",
            "e2e-dashboard-none",
            "--no-leader-elect",
            "--metrics-port",
            "0",
            "--health-port",
            "0",
            "--dashboard-port",
            str(port),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if _get(f"{url}/healthz")[0] == 200:
                    break
            except OSError:
                pass
            assert operator.poll() is None, "the operator exited"
            assert time.monotonic() < deadline, "the dashboard never answered"
            time.sleep(0.2)
        assert _get(f"{url}/api/whoami")[0] == 401
        link = subprocess.run(
            [*RAYQUOTA, "dashboard", "token", "--url", url],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert link.startswith(f"{url}/#token=")
        token = link.split("#token=", 1)[1]
        status, body = _get(f"{url}/api/whoami", token)
        assert status == 200
        assert json.loads(body)["user"] == "system:serviceaccount:default:rayquota-dashboard-viewer"
        status, body = _get(f"{url}/api/cohorts", token)
        assert status == 200 and "clusterQueues" in json.loads(body)
    finally:
        operator.send_signal(signal.SIGTERM)
        try:
            out, _ = operator.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            operator.kill()
            out, _ = operator.communicate()
    assert f"dashboard on http://127.0.0.1:{port}/" in out
