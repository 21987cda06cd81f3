"""The Helm chart as tests use it: helm with its own state folders, rendered manifests, and a
kubeconfig that authenticates as the chart's ServiceAccount."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from rayquota.config import Loaded, Settings, build, load
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


# KubeRay's own values file for its operator chart at v1.7.0 (data only; see the file's header).
KUBERAY_VALUES = REPO / "tests" / "e2e" / "data" / "kuberay-operator-values-v1.7.0.yaml"


def render(
    *values: str, chart: Path = CHART, namespace: str = "rayquota-system", files: tuple[Path, ...] = ()
) -> list[dict[str, Any]]:
    """`helm template --include-crds` with values files (`-f`, in order) and `--set` values, as a
    list of objects."""
    result = template(*values, chart=chart, namespace=namespace, files=files)
    assert result.returncode == 0, result.stderr
    return documents(result.stdout)


# libyaml's loader where PyYAML has it: the chart renders ~2.6 MB (the CRDs' full schemas), which
# the pure-Python loader takes ~9 s to read and libyaml ~1 s, with the same objects.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def documents(text: str) -> list[dict[str, Any]]:
    """The objects of a multi-document YAML text (``helm template``'s output), empty ones left out."""
    return [doc for doc in yaml.load_all(text, Loader=_LOADER) if doc]


def template(
    *values: str, chart: Path = CHART, namespace: str = "rayquota-system", files: tuple[Path, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """`helm template` as it ran, for tests of what the chart refuses."""
    sets = [arg for value in values for arg in ("--set", value)]
    args = [arg for path in files for arg in ("-f", str(path))]
    return helm("template", "rq", str(chart), "-n", namespace, "--include-crds", *args, *sets)


def configuration_of(objects: list[dict[str, Any]], tmp: Path | None = None) -> Loaded:
    """The configuration the chart renders into its ConfigMap, read by the operator's own loader."""
    [config_map] = [c for c in find(objects, "ConfigMap") if c["metadata"]["name"].endswith("-config")]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(tmp or folder) / "config.yaml"
        path.write_text(config_map["data"]["config.yaml"])
        return load(path)


def settings_of(objects: list[dict[str, Any]]) -> Settings:
    """The runtime settings `rayquota run --config` starts with from the rendered ConfigMap."""
    return build.settings(configuration_of(objects))


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


def is_discovery(line: str) -> bool:
    """A discovery read (``/api``, ``/apis``, a group or a version): every authenticated user may
    make it (the built-in ``system:discovery`` role), so it asks the chart for no grant."""
    path = line.split(" ", 1)[-1].split("?", 1)[0].strip("/").split("/")
    return (path[0] == "api" and len(path) <= 2) or (path[0] == "apis" and len(path) <= 3)


def grant_of_request(line: str) -> tuple[str, str, str]:
    """(api group, resource[/subresource], RBAC verb) of one request-log line."""
    method, path = line.split(" ", 1)
    parts = path.split("?", 1)[0].strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]  # /namespaces/<ns>/<resource>...: a namespaced resource
    resource, name, sub = rest[0], rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None
    verb = {
        "GET": "get" if name else "list",
        "WATCH": "watch",
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if name else "deletecollection",
    }[method]
    return group, f"{resource}/{sub}" if sub else resource, verb
