"""The operator as a user runs it: the CLI against the local control plane, and the Helm chart."""

from __future__ import annotations

import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from rayquota.localcluster import binaries
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.ports import free_port

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
        deadline = time.monotonic() + 60
        healthy = False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{health}/healthz", timeout=1) as resp:
                    healthy = resp.status == 200
                    break
            except OSError:
                time.sleep(0.2)
        assert healthy, "operator never answered /healthz"
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


def _helm(*args: str, cluster: LocalCluster | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        HELM_CACHE_HOME="/tmp/rayquota-helm/cache",
        HELM_CONFIG_HOME="/tmp/rayquota-helm/config",
        HELM_DATA_HOME="/tmp/rayquota-helm/data",
    )
    if cluster is not None:
        env["KUBECONFIG"] = str(cluster.kubeconfig)
    return subprocess.run([str(binaries.HELM.path("helm")), *args], capture_output=True, text=True, env=env)


def test_helm_chart_lints_and_renders() -> None:
    lint = _helm("lint", str(REPO / "helm" / "rayquota"))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    rendered = _helm(
        "template", "rq", str(REPO / "helm" / "rayquota"), "--set", "watchNamespaces={team-a,team-b}"
    )
    assert rendered.returncode == 0, rendered.stderr
    assert "--namespace=team-a" in rendered.stdout
    assert "kind: ClusterRole" in rendered.stdout
    # The chart ships the generated CRDs (helm/rayquota/crds links to crds/).
    with_crds = _helm("template", "rq", str(REPO / "helm" / "rayquota"), "--include-crds")
    assert with_crds.returncode == 0, with_crds.stderr
    generated = len(list((REPO / "crds").glob("*.yaml")))
    assert with_crds.stdout.count("kind: CustomResourceDefinition") == generated


@pytest.mark.usefixtures("crds_installed")
def test_helm_install_creates_the_operator_objects(control_plane: LocalCluster, namespace: str) -> None:
    release = f"rq-{namespace[-6:]}"
    install = _helm(
        "install",
        release,
        str(REPO / "helm" / "rayquota"),
        "-n",
        namespace,
        "--skip-crds",
        "--wait",
        "--timeout",
        "90s",
        cluster=control_plane,
    )
    try:
        assert install.returncode == 0, install.stdout + install.stderr
        deploy = json.loads(control_plane.kubectl("get", "deployment", "-n", namespace, "-o", "json").stdout)[
            "items"
        ]
        assert len(deploy) == 1
        # The chart runs 2 replicas by default; leader election keeps one active.
        assert deploy[0]["spec"]["replicas"] == 2
        assert deploy[0]["status"].get("readyReplicas") == 2
        roles = control_plane.kubectl("get", "clusterrole", f"{release}-rayquota", "-o", "json", check=False)
        assert roles.returncode == 0
        _operator_under_chart_rbac_runs_a_cluster(control_plane, namespace, f"{release}-rayquota")
    finally:
        _helm("uninstall", release, "-n", namespace, cluster=control_plane)


def _operator_under_chart_rbac_runs_a_cluster(cluster: LocalCluster, namespace: str, account: str) -> None:
    """Run the operator with the chart's ServiceAccount token: its ClusterRole must be enough to run
    a RayCluster with the autoscaler (pods, services, events, serviceaccounts, roles, status)."""
    token = cluster.kubectl("create", "token", account, "-n", namespace, "--duration=15m").stdout.strip()
    ca = yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]["certificate-authority"]
    kubeconfig = cluster.state_dir / f"sa-{namespace}.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": cluster.server, "certificate-authority": ca}}
                ],
                "users": [{"name": "sa", "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}],
                "current-context": "sa",
            }
        )
    )
    sample = yaml.safe_load((REPO / "samples" / "ray-cluster.complete.yaml").read_text())
    sample["metadata"]["namespace"] = namespace
    # This checks the Ray half's RBAC: unqueued, the cluster runs without a LocalQueue.
    sample["metadata"].get("labels", {}).pop("rayquota.io/queue-name", None)
    proc = subprocess.Popen(
        [*RAYQUOTA, "run", "-n", namespace, "--health-port=0", "--metrics-port=0"],
        env=dict(os.environ, KUBECONFIG=str(kubeconfig)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(sample))
        name = sample["metadata"]["name"]
        deadline = time.monotonic() + 90
        state = None
        while time.monotonic() < deadline and proc.poll() is None:
            out = cluster.kubectl("get", "raycluster", name, "-n", namespace, "-o", "json").stdout
            state = (json.loads(out).get("status") or {}).get("state")
            if state == "ready":
                break
            time.sleep(0.5)
        ready = state == "ready"
        if ready:
            autoscaler_sa = cluster.kubectl("get", "serviceaccount", name, "-n", namespace, check=False)
            assert autoscaler_sa.returncode == 0, autoscaler_sa.stderr
            cluster.kubectl("delete", "raycluster", name, "-n", namespace, "--wait=true", "--timeout=60s")
    finally:
        out = _stop(proc)
    assert ready, f"RayCluster never became ready under the chart's RBAC (state {state!r}):\n{out[-4000:]}"
    assert "Forbidden" not in out and "403" not in out, out[-4000:]
