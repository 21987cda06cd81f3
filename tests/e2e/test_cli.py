"""The operator as a user runs it: the CLI against the local control plane (the Helm chart is in
test_chart_*.py)."""

from __future__ import annotations

import importlib.metadata
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from rayquota.localcluster.cluster import LocalCluster
from rayquota.ports import free_port
from tests.polling import wait_for

REPO = Path(__file__).resolve().parents[2]
RAYQUOTA = [sys.executable, "-m", "rayquota.cli"]


def _stop(proc: subprocess.Popen[str]) -> str:
    """SIGTERM the operator (killing it after 30 s) and return everything it printed."""
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out


def _env(cluster: LocalCluster) -> dict[str, str]:
    return dict(os.environ, KUBECONFIG=str(cluster.kubeconfig))


def test_cluster_status_and_env(control_plane: LocalCluster) -> None:
    status = subprocess.run(
        [*RAYQUOTA, "cluster", "status", "--name", control_plane.name], capture_output=True, text=True
    )
    assert status.returncode == 0, status.stderr
    for component in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"):
        assert f"{component}" in status.stdout
    assert "stopped" not in status.stdout
    env = subprocess.run(
        [*RAYQUOTA, "cluster", "env", "--name", control_plane.name],
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"export KUBECONFIG={control_plane.kubeconfig}" in env.stdout


def test_status_of_a_cluster_that_is_not_running() -> None:
    status = subprocess.run(
        [*RAYQUOTA, "cluster", "status", "--name", "never-started"], capture_output=True, text=True
    )
    assert status.returncode == 3
    assert "not started" in status.stdout


def test_install_then_run_the_operator(control_plane: LocalCluster, crds_installed: None) -> None:
    install = subprocess.run([*RAYQUOTA, "install"], capture_output=True, text=True, env=_env(control_plane))
    assert install.returncode == 0, install.stderr
    assert "installed" in install.stderr
    health, metrics = free_port(), free_port()
    launched_at = time.time()
    proc = subprocess.Popen(
        [*RAYQUOTA, "run", f"--health-port={health}", f"--metrics-port={metrics}"],
        env=_env(control_plane),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def healthy() -> bool:
            assert proc.poll() is None, "the operator exited"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{health}/healthz", timeout=1) as resp:
                    return bool(resp.status == 200)
            except OSError:
                return False

        wait_for("the operator's /healthz", healthy, timeout_s=60)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=2) as resp:
            samples = _metric_samples(resp.read().decode())
        # The endpoint belongs to this operator process: it started after we launched it, holds
        # memory, and has used CPU.
        assert launched_at - 1 <= samples["process_start_time_seconds"] <= time.time()
        assert samples["process_resident_memory_bytes"] > 20 * 2**20
        assert samples["process_cpu_seconds_total"] > 0
        assert samples["process_open_fds"] > 0
    finally:
        out = _stop(proc)
    assert proc.returncode == 0, out
    assert f"rayquota operator {importlib.metadata.version('rayquota')} starting" in out


def _metric_samples(exposition: str) -> dict[str, float]:
    """Unlabelled samples of a Prometheus text exposition, by name."""
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if not sample.labels
    }


def test_run_without_kubeconfig_fails_clearly() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    result = subprocess.run([*RAYQUOTA, "run"], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 2
    assert "KUBECONFIG is not set" in result.stderr
