"""Our chart installed with KubeRay's own values file (v1.7.0, unchanged), and a namespace-only
install (KubeRay's singleNamespaceInstall) whose operator runs, as the chart configures it, under
a ServiceAccount with no cluster-scoped grant at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.config import build, load
from rayquota.localcluster.cluster import LocalCluster
from rayquota.operator.permissions import offline_manager, required_permissions
from rayquota.ports import free_port
from tests.e2e.chart import CHART, KUBERAY_VALUES, REPO, helm, is_discovery, service_account_kubeconfig
from tests.e2e.test_chart_install import LocalOperator
from tests.polling import wait_for
from tests.quota import cluster_pods, get_json, sample_cluster

pytestmark = pytest.mark.usefixtures("crds_installed")

FULLNAME = "kuberay-operator"  # KubeRay's values file sets fullnameOverride and the account's name


@pytest.fixture
def kuberay_release(control_plane: LocalCluster, namespace: str) -> Iterator[list[str]]:
    """Extra `--set` values per test; the release (KubeRay's file, then those) is uninstalled after."""
    installed: list[str] = []
    try:
        yield installed
    finally:
        if installed:
            helm("uninstall", "kuberay-operator", "-n", namespace, "--wait", cluster=control_plane)


def install_with_kuberay_values(cluster: LocalCluster, namespace: str, *values: str) -> dict[str, Any]:
    sets = [arg for value in values for arg in ("--set", value)]
    result = helm(
        "install", "kuberay-operator", str(CHART), "-n", namespace, "-f", str(KUBERAY_VALUES), *sets,
        "--wait", "--timeout", "120s", cluster=cluster,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    # helm's --wait counts the ReplicaSet's pods; the Deployment's own status follows a moment later.
    def ready() -> dict[str, Any] | None:
        deployment = get_json(cluster, "deployment", FULLNAME, "-n", namespace)
        return deployment if deployment and deployment["status"].get("readyReplicas") == 1 else None

    return wait_for("the operator's Deployment with its replica ready", ready, timeout_s=60)


def test_kuberays_values_file_installs_our_chart(
    control_plane: LocalCluster, namespace: str, kuberay_release: list[str]
) -> None:
    # The file unchanged; webhooks off only because this cluster's nodes are kwok fakes.
    kuberay_release.append("installed")
    deployment = install_with_kuberay_values(control_plane, namespace, "webhooks.enabled=false")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"].startswith("ghcr.io/rayquota/rayquota:")
    cluster_roles = {
        r["metadata"]["name"]
        for r in json.loads(control_plane.kubectl("get", "clusterroles", "-o", "json").stdout)["items"]
    }
    assert {FULLNAME, f"{FULLNAME}-cluster"} <= cluster_roles


class ChartOperator(LocalOperator):
    """`rayquota run` with the Deployment's own arguments, environment and configuration file (its
    ConfigMap's, as installed), under `kubeconfig`, recording its requests
    (tests/e2e/recording_operator.py). Only what cannot apply outside the cluster changes: it binds
    to loopback (an override of the file's bindAddress) and on free ports."""

    def __init__(
        self, deployment: dict[str, Any], config_map: dict[str, Any], kubeconfig: Path, log_dir: Path
    ) -> None:
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        self.metrics_port = free_port()
        self.config = log_dir / "config.yaml"
        self.config.write_text(config_map["data"]["config.yaml"])
        replaced = {
            "--metrics-port": str(self.metrics_port),
            "--health-port": "0",
            "--config": str(self.config),
        }
        args = [
            f"{a.split('=')[0]}={replaced[a.split('=')[0]]}" if a.split("=")[0] in replaced else a
            for a in container["args"]
        ]
        env = {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e}
        env.update(RAYQUOTA_BIND_ADDRESS="127.0.0.1")
        self.args, self.env = args, env
        self.requests = log_dir / "requests.log"
        self.output = log_dir / "operator.log"
        with self.output.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.e2e.recording_operator", *args],
                env={
                    **os.environ,
                    **env,
                    "KUBECONFIG": str(kubeconfig),
                    "RAYQUOTA_TEST_REQUEST_LOG": str(self.requests),
                },
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
            )

    def paths(self) -> list[str]:
        # Discovery reads (the operator's OpenShift check) need no grant and name no namespace.
        lines = self.requests.read_text().splitlines()
        return [line.split(" ", 1)[1] for line in lines if line and not is_discovery(line)]


def test_a_single_namespace_install_runs_without_any_cluster_scoped_grant(
    control_plane: LocalCluster, namespace: str, kuberay_release: list[str], tmp_path: Path
) -> None:
    kuberay_release.append("installed")
    deployment = install_with_kuberay_values(control_plane, namespace, "singleNamespaceInstall=true")
    account = f"system:serviceaccount:{namespace}:{FULLNAME}"
    # Nothing cluster-scoped names the account: no ClusterRoleBinding, so no cluster-wide grant.
    bindings = json.loads(control_plane.kubectl("get", "clusterrolebindings", "-o", "json").stdout)["items"]
    assert not [
        b["metadata"]["name"]
        for b in bindings
        for s in b.get("subjects") or []
        if s.get("kind") == "ServiceAccount" and (s.get("namespace"), s.get("name")) == (namespace, FULLNAME)
    ]
    for resource in ("clusterqueues.rayquota.io", "namespaces", "rayclusters.ray.io"):
        # ... not even the Ray kinds outside its namespace.
        allowed = control_plane.kubectl(
            "auth", "can-i", "list", resource, "-A", f"--as={account}", check=False
        )
        assert allowed.stdout.strip() == "no", (resource, allowed.stdout)
    config_map = get_json(control_plane, "configmap", f"{FULLNAME}-config", "-n", namespace)
    assert config_map is not None
    operator = ChartOperator(
        deployment, config_map, service_account_kubeconfig(control_plane, namespace, FULLNAME), tmp_path
    )
    try:
        cluster = sample_cluster(
            namespace
        )  # labelled for a queue: without the queue it runs as under KubeRay
        name = cluster["metadata"]["name"]
        control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(cluster))
        wait_for("the RayCluster's pods", lambda: len(cluster_pods(control_plane, namespace, name)) >= 2, 120)
        wait_for(
            "the RayCluster ready",
            lambda: (
                (
                    (get_json(control_plane, "raycluster", name, "-n", namespace) or {}).get("status") or {}
                ).get("state")
                == "ready"
            ),
            120,
        )
    finally:
        out = operator.stop()
    assert operator.proc.returncode == 0, out[-4000:]
    assert "Forbidden" not in out and " 403" not in out, out[-4000:]
    # KubeRay's logging.stdoutEncoder json: one JSON object per log line.
    started = [json.loads(line) for line in out.splitlines() if '"components:' in line]
    assert started and started[0]["msg"].startswith("components: ray"), out[-2000:]
    # Every request stayed inside the managed namespace (and the release's, the same here)...
    assert all(f"/namespaces/{namespace}/" in path for path in operator.paths()), operator.paths()[:20]
    # ... and was declared for this configuration.
    config = build.operator_config(load(operator.config).configuration)
    assert not config.queue_enabled
    manager, components = offline_manager(config)
    needed = required_permissions(manager, components, self_issued_cert=False)
    declared = {(p.group, p.resource, p.verb) for p in needed.namespaced | needed.own_namespace}
    assert operator.grants() <= declared, sorted(operator.grants() - declared)
