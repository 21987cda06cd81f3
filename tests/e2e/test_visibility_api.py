"""The pending-workloads API (Kueue's visibility API) through the API server's aggregation layer
on the local control plane: ``kubectl get --raw`` answers with the engine's order (the positions
``rayquota explain`` gives), pages with ``limit``/``offset``, and RBAC decides who may read it:
a user without ``view`` is refused, by the API server and by the operator's own delegated check."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import os
import re
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from rayquota import pki
from rayquota.localcluster import binaries
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.pki import FrontProxyFiles
from rayquota.operator.config import OperatorConfig
from rayquota.operator.queue import cli_views
from rayquota.operator.visibility.discovery import RAYQUOTA_VISIBILITY_GROUP
from rayquota.operator.visibility.registration import API_SERVICES
from rayquota.operator.visibility.settings import VisibilitySettings
from tests.operator_thread import operator_thread
from tests.polling import wait_for

GROUP_VERSION = f"/apis/{RAYQUOTA_VISIBILITY_GROUP}/v1alpha1"
# (name, LocalQueue, priority), created in this order while the holder takes all the quota.
PENDING = [("low-a", "lq-a", 0), ("high-b", "lq-b", 10), ("low-b", "lq-b", 0), ("mid-a", "lq-a", 5)]
CQ_ORDER = ["high-b", "mid-a", "low-a", "low-b"]


def _apply(cluster: LocalCluster, body: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump({"apiVersion": "rayquota.io/v1alpha1", **body}))


def _workload(namespace: str, name: str, queue: str, priority: int) -> dict[str, Any]:
    return {
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "1"}}],
        },
    }


@pytest.fixture
def queues(control_plane: LocalCluster, namespace: str) -> Iterator[str]:
    flavor, cq = f"{namespace}-rf", f"{namespace}-cq"
    _apply(control_plane, {"kind": "ResourceFlavor", "metadata": {"name": flavor}, "spec": {}})
    resources = [{"name": "cpu", "nominalQuota": 1}]
    groups = [{"coveredResources": ["cpu"], "flavors": [{"name": flavor, "resources": resources}]}]
    spec = {"namespaceSelector": {}, "resourceGroups": groups}
    _apply(control_plane, {"kind": "ClusterQueue", "metadata": {"name": cq}, "spec": spec})
    for lq in ("lq-a", "lq-b"):
        meta = {"name": lq, "namespace": namespace}
        _apply(control_plane, {"kind": "LocalQueue", "metadata": meta, "spec": {"clusterQueue": cq}})
    try:
        yield cq
    finally:
        control_plane.kubectl("delete", "clusterqueues.rayquota.io", cq, "--wait=false", check=False)
        control_plane.kubectl("delete", "resourceflavors.rayquota.io", flavor, "--wait=false", check=False)


def _raw(
    cluster: LocalCluster, path: str, kubeconfig: Path | None = None
) -> subprocess.CompletedProcess[str]:
    args = ["get", "--raw", path]
    if kubeconfig is not None:
        return subprocess.run(
            ["kubectl", *args],
            env={**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": _path_with_kubectl()},
            capture_output=True,
            text=True,
            timeout=60,
        )
    return cluster.kubectl(*args, check=False)


def _path_with_kubectl() -> str:
    return f"{binaries.KUBERNETES.cache_dir}:{os.environ.get('PATH', '')}"


def _items(cluster: LocalCluster, path: str) -> list[dict[str, Any]]:
    done = _raw(cluster, path)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["kind"] == "PendingWorkloadsSummary"
    return list(body["items"])


def _explained_positions(namespace: str, names: list[str]) -> list[int]:
    """``rayquota explain workload/NAME``'s "queue position: N" for each (its own code, in this
    process: one read of the API server for all of them)."""
    state = asyncio.run(cli_views.fetch_state(namespace))
    positions = []
    for name in names:
        words = cli_views.explain(state, "workload", name, namespace)
        found = re.search(r"queue position: (\d+)", words)
        assert found is not None, words
        positions.append(int(found.group(1)))
    return positions


def _user_kubeconfig(cluster: LocalCluster, user: str, folder: Path) -> Path:
    """A kubeconfig for `user` (no groups), with a client certificate the cluster CA signs."""
    state = Path(cluster.kubeconfig).parent / "pki"
    ca_cert = x509.load_pem_x509_certificate((state / "ca.crt").read_bytes())
    ca_key = pki.load_key((state / "ca.key").read_bytes())
    key = pki.new_key()
    cert = pki.issue_leaf(pki.name(user), key, ca_cert, ca_key, validity=dt.timedelta(hours=1), client=True)
    (folder / f"{user}.crt").write_bytes(pki.cert_pem(cert))
    (folder / f"{user}.key").write_bytes(pki.key_pem(key))
    config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    config["users"] = [
        {
            "name": user,
            "user": {
                "client-certificate": str(folder / f"{user}.crt"),
                "client-key": str(folder / f"{user}.key"),
            },
        }
    ]
    for context in config["contexts"]:
        context["context"]["user"] = user
    path = folder / f"{user}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def _direct(cluster: LocalCluster, path: str, user: str) -> int:
    """Call the operator's server as the aggregator does (front-proxy certificate, X-Remote-User),
    bypassing the API server's own authorization: the operator's SubjectAccessReview decides."""
    service = json.loads(
        cluster.kubectl(
            "get", "--raw", API_SERVICES.path(name=f"v1alpha1.{RAYQUOTA_VISIBILITY_GROUP}")
        ).stdout
    )
    port = service["spec"]["service"]["port"]
    context = ssl.create_default_context(cadata=base64.b64decode(service["spec"]["caBundle"]).decode())
    front = FrontProxyFiles.under(Path(cluster.kubeconfig).parent / "pki")
    context.load_cert_chain(front.client_cert, front.client_key)
    request = urllib.request.Request(f"https://127.0.0.1:{port}{path}", headers={"X-Remote-User": user})
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)


def test_pending_workloads_through_the_aggregation_layer(
    control_plane: LocalCluster, namespace: str, queues: str, tmp_path: Path
) -> None:
    config = OperatorConfig(visibility=VisibilitySettings(0))
    with operator_thread(config, [namespace]):
        _apply(control_plane, _workload(namespace, "holder", "lq-a", 100))
        wait_for(
            "the holder admitted",
            lambda: (
                "admission"
                in json.loads(
                    control_plane.kubectl(
                        "get", "workloads.rayquota.io", "holder", "-n", namespace, "-o", "json"
                    ).stdout
                ).get("status", {})
            ),
            timeout_s=30,
        )
        for name, queue, priority in PENDING:
            _apply(control_plane, _workload(namespace, name, queue, priority))
        cq_path = f"{GROUP_VERSION}/clusterqueues/{queues}/pendingworkloads"
        items = wait_for(
            "all four pending in the ClusterQueue's answer",
            lambda: got if len(got := _items(control_plane, cq_path)) == 4 else None,
            timeout_s=60,
            interval_s=0.5,
        )
        assert [i["metadata"]["name"] for i in items] == CQ_ORDER
        assert [i["positionInClusterQueue"] for i in items] == [0, 1, 2, 3]
        assert [(i["localQueueName"], i["positionInLocalQueue"], i["priority"]) for i in items] == [
            ("lq-b", 0, 10), ("lq-a", 0, 5), ("lq-a", 1, 0), ("lq-b", 1, 0)
        ]  # fmt: skip
        explained = _explained_positions(namespace, [i["metadata"]["name"] for i in items])
        assert explained == [i["positionInClusterQueue"] + 1 for i in items]

        page = _items(control_plane, f"{cq_path}?limit=2&offset=1")
        assert [(i["metadata"]["name"], i["positionInClusterQueue"]) for i in page] == [
            ("mid-a", 1),
            ("low-a", 2),
        ]
        lq_path = f"{GROUP_VERSION}/namespaces/{namespace}/localqueues/lq-b/pendingworkloads"
        in_b = _items(control_plane, lq_path)
        positions = [
            (i["metadata"]["name"], i["positionInLocalQueue"], i["positionInClusterQueue"]) for i in in_b
        ]
        assert positions == [("high-b", 0, 0), ("low-b", 1, 3)]
        missing = _raw(control_plane, f"{GROUP_VERSION}/clusterqueues/no-such-cq/pendingworkloads")
        assert missing.returncode != 0 and "not found" in missing.stderr.lower(), missing.stderr
        listed = json.loads(control_plane.kubectl("get", "--raw", GROUP_VERSION).stdout)
        assert {r["name"]: r["verbs"] for r in listed["resources"]}["clusterqueues/pendingworkloads"] == [
            "get"
        ]
        discovered = control_plane.kubectl("api-resources", "-o", "name")
        assert RAYQUOTA_VISIBILITY_GROUP not in discovered.stderr, discovered.stderr  # no discovery error

        user = f"nobody-{namespace}"
        kubeconfig = _user_kubeconfig(control_plane, user, tmp_path)
        refused = _raw(control_plane, cq_path, kubeconfig)
        assert refused.returncode != 0 and "Forbidden" in refused.stderr, refused.stderr
        assert _direct(control_plane, cq_path, user) == 403
        binding = f"{namespace}-view"
        control_plane.kubectl("create", "clusterrolebinding", binding, "--clusterrole=view", f"--user={user}")
        try:
            allowed = wait_for(
                "view to grant the pendingworkloads resources",
                lambda: got if (got := _raw(control_plane, cq_path, kubeconfig)).returncode == 0 else None,
                timeout_s=30,
                interval_s=0.5,
            )
            assert [i["metadata"]["name"] for i in json.loads(allowed.stdout)["items"]] == CQ_ORDER
            assert _direct(control_plane, cq_path, user) == 200
        finally:
            control_plane.kubectl("delete", "clusterrolebinding", binding, check=False)
    gone = control_plane.kubectl("get", "apiservices", f"v1alpha1.{RAYQUOTA_VISIBILITY_GROUP}", check=False)
    assert gone.returncode != 0, "the operator left its APIService registered"
