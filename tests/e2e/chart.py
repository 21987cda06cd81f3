"""The Helm chart as tests use it: helm with its own state folders, rendered manifests, and a
kubeconfig that authenticates as the chart's ServiceAccount."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from rayquota.localcluster import binaries
from rayquota.localcluster.cluster import LocalCluster

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "rayquota"


def helm(*args: str, cluster: LocalCluster | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        HELM_CACHE_HOME="/tmp/rayquota-helm/cache",
        HELM_CONFIG_HOME="/tmp/rayquota-helm/config",
        HELM_DATA_HOME="/tmp/rayquota-helm/data",
    )
    if cluster is not None:
        env["KUBECONFIG"] = str(cluster.kubeconfig)
    return subprocess.run([str(binaries.HELM.path("helm")), *args], capture_output=True, text=True, env=env)


def render(*values: str, chart: Path = CHART, namespace: str = "rayquota-system") -> list[dict[str, Any]]:
    """`helm template --include-crds` with `--set` values, as a list of objects."""
    sets = [arg for value in values for arg in ("--set", value)]
    result = helm("template", "rq", str(chart), "-n", namespace, "--include-crds", *sets)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> Iterator[dict[str, Any]]:
    for obj in objects:
        if obj["kind"] == kind and (name is None or obj["metadata"]["name"] == name):
            yield obj


def service_account_kubeconfig(cluster: LocalCluster, namespace: str, account: str) -> Path:
    """A kubeconfig that authenticates with a TokenRequest token of `account`."""
    token = cluster.kubectl("create", "token", account, "-n", namespace, "--duration=30m").stdout.strip()
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
    return kubeconfig
