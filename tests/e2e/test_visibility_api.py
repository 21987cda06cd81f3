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

from rayquota import cli_views, pki
from rayquota.localcluster import binaries
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.pki import FrontProxyFiles
from rayquota.operator.config import OperatorConfig
from rayquota.operator.queue.kueue.api_group import KUEUE, RAYQUOTA, QueueApi
from rayquota.operator.queue.settings import QueueConfig
from rayquota.operator.visibility.discovery import KUEUE_VISIBILITY_GROUP, RAYQUOTA_VISIBILITY_GROUP
from rayquota.operator.visibility.registration import API_SERVICES, HOLDER_ANNOTATION
from rayquota.operator.visibility.settings import VisibilitySettings
from tests.operator_process import OperatorProcess
from tests.operator_thread import operator_thread
from tests.polling import wait_for

GROUP_VERSION = f"/apis/{RAYQUOTA_VISIBILITY_GROUP}/v1alpha1"
KUEUE_GROUP_VERSION = f"/apis/{KUEUE_VISIBILITY_GROUP}/v1beta2"  # Kueue's served (preferred) version
# (name, LocalQueue, priority), created in this order while the holder takes all the quota.
PENDING = [("low-a", "lq-a", 0), ("high-b", "lq-b", 10), ("low-b", "lq-b", 0), ("mid-a", "lq-a", 5)]
CQ_ORDER = ["high-b", "mid-a", "low-a", "low-b"]


def _apply(cluster: LocalCluster, body: dict[str, Any], api: QueueApi = RAYQUOTA) -> None:
    api_version = f"{api.workloads.group}/{api.workloads.version}"
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump({"apiVersion": api_version, **body}))


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


def _kueue_workload(namespace: str, name: str, queue: str, priority: int) -> dict[str, Any]:
    """The same in Kueue's shape: a pod set carries a pod template."""
    body = _workload(namespace, name, queue, priority)
    container = {"name": "c", "resources": {"requests": {"cpu": "1"}}}
    body["spec"]["podSets"] = [
        {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}
    ]
    return body


def _create_queues(cluster: LocalCluster, namespace: str, api: QueueApi) -> str:
    """A ClusterQueue of 1 CPU with LocalQueues lq-a and lq-b in `namespace`; its name."""
    flavor, cq = f"{namespace}-rf", f"{namespace}-cq"
    _apply(cluster, {"kind": "ResourceFlavor", "metadata": {"name": flavor}, "spec": {}}, api)
    resources = [{"name": "cpu", "nominalQuota": 1}]
    groups = [{"coveredResources": ["cpu"], "flavors": [{"name": flavor, "resources": resources}]}]
    spec = {"namespaceSelector": {}, "resourceGroups": groups}
    _apply(cluster, {"kind": "ClusterQueue", "metadata": {"name": cq}, "spec": spec}, api)
    for lq in ("lq-a", "lq-b"):
        meta = {"name": lq, "namespace": namespace}
        _apply(cluster, {"kind": "LocalQueue", "metadata": meta, "spec": {"clusterQueue": cq}}, api)
    return cq


def _delete_queues(cluster: LocalCluster, namespace: str, api: QueueApi) -> None:
    group = api.workloads.group
    cluster.kubectl("delete", f"clusterqueues.{group}", f"{namespace}-cq", "--wait=false", check=False)
    cluster.kubectl("delete", f"resourceflavors.{group}", f"{namespace}-rf", "--wait=false", check=False)


@pytest.fixture
def queues(control_plane: LocalCluster, namespace: str) -> Iterator[str]:
    try:
        yield _create_queues(control_plane, namespace, RAYQUOTA)
    finally:
        _delete_queues(control_plane, namespace, RAYQUOTA)


@pytest.fixture
def kueue_queues(control_plane: LocalCluster, namespace: str) -> Iterator[str]:
    """The same queues as Kueue's own objects (kueue.x-k8s.io/v1beta2, Kueue's CRDs)."""
    from rayquota.localcluster import kueue_crds

    kueue_crds.install(control_plane)
    try:
        yield _create_queues(control_plane, namespace, KUEUE)
    finally:
        _delete_queues(control_plane, namespace, KUEUE)


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


def _explained_positions(namespace: str, names: list[str], api: QueueApi = RAYQUOTA) -> list[int]:
    """``rayquota explain workload/NAME``'s "queue position: N" for each (its own code, in this
    process: one read of the API server for all of them)."""
    state = asyncio.run(cli_views.fetch_state(namespace, api=api))
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


def _direct(
    cluster: LocalCluster, path: str, user: str, apiservice: str = f"v1alpha1.{RAYQUOTA_VISIBILITY_GROUP}"
) -> int:
    """Call the operator's server as the aggregator does (front-proxy certificate, X-Remote-User),
    bypassing the API server's own authorization: the operator's SubjectAccessReview decides."""
    service = json.loads(cluster.kubectl("get", "--raw", API_SERVICES.path(name=apiservice)).stdout)
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


def _admitted(cluster: LocalCluster, namespace: str, name: str, api: QueueApi) -> bool:
    got = cluster.kubectl("get", f"workloads.{api.workloads.group}", name, "-n", namespace, "-o", "json")
    return "admission" in json.loads(got.stdout).get("status", {})


def _check_pending_order(
    cluster: LocalCluster, namespace: str, cq: str, group_version: str, api: QueueApi
) -> list[dict[str, Any]]:
    """Queue a holder of all the quota and four behind it; both paths answer the engine's order,
    and the positions equal `explain`'s. The ClusterQueue's items."""
    make = _kueue_workload if api is KUEUE else _workload
    _apply(cluster, make(namespace, "holder", "lq-a", 100), api)
    wait_for("the holder admitted", lambda: _admitted(cluster, namespace, "holder", api), timeout_s=30)
    for name, queue, priority in PENDING:
        _apply(cluster, make(namespace, name, queue, priority), api)
    cq_path = f"{group_version}/clusterqueues/{cq}/pendingworkloads"
    items = wait_for(
        "all four pending in the ClusterQueue's answer",
        lambda: got if len(got := _items(cluster, cq_path)) == 4 else None,
        timeout_s=60,
        interval_s=0.5,
    )
    assert [i["metadata"]["name"] for i in items] == CQ_ORDER
    assert [i["positionInClusterQueue"] for i in items] == [0, 1, 2, 3]
    assert [(i["localQueueName"], i["positionInLocalQueue"], i["priority"]) for i in items] == [
        ("lq-b", 0, 10), ("lq-a", 0, 5), ("lq-a", 1, 0), ("lq-b", 1, 0)
    ]  # fmt: skip
    explained = _explained_positions(namespace, [i["metadata"]["name"] for i in items], api)
    assert explained == [i["positionInClusterQueue"] + 1 for i in items]
    lq_path = f"{group_version}/namespaces/{namespace}/localqueues/lq-b/pendingworkloads"
    in_b = _items(cluster, lq_path)
    positions = [
        (i["metadata"]["name"], i["positionInLocalQueue"], i["positionInClusterQueue"]) for i in in_b
    ]
    assert positions == [("high-b", 0, 0), ("low-b", 1, 3)]
    return items


def _refused_without_view(cluster: LocalCluster, namespace: str, path: str, tmp_path: Path) -> str:
    """A user with no role is refused by the API server (403); the user's name."""
    user = f"nobody-{namespace}"
    kubeconfig = _user_kubeconfig(cluster, user, tmp_path)
    refused = _raw(cluster, path, kubeconfig)
    assert refused.returncode != 0 and "Forbidden" in refused.stderr, refused.stderr
    return user


def test_pending_workloads_through_the_aggregation_layer(
    control_plane: LocalCluster, namespace: str, queues: str, tmp_path: Path
) -> None:
    config = OperatorConfig(visibility=VisibilitySettings(0))
    with operator_thread(config, [namespace]):
        _check_pending_order(control_plane, namespace, queues, GROUP_VERSION, RAYQUOTA)
        cq_path = f"{GROUP_VERSION}/clusterqueues/{queues}/pendingworkloads"
        page = _items(control_plane, f"{cq_path}?limit=2&offset=1")
        assert [(i["metadata"]["name"], i["positionInClusterQueue"]) for i in page] == [
            ("mid-a", 1),
            ("low-a", 2),
        ]
        missing = _raw(control_plane, f"{GROUP_VERSION}/clusterqueues/no-such-cq/pendingworkloads")
        assert missing.returncode != 0 and "not found" in missing.stderr.lower(), missing.stderr
        listed = json.loads(control_plane.kubectl("get", "--raw", GROUP_VERSION).stdout)
        assert {r["name"]: r["verbs"] for r in listed["resources"]}["clusterqueues/pendingworkloads"] == [
            "get"
        ]
        discovered = control_plane.kubectl("api-resources", "-o", "name")
        assert RAYQUOTA_VISIBILITY_GROUP not in discovered.stderr, discovered.stderr  # no discovery error

        user = _refused_without_view(control_plane, namespace, cq_path, tmp_path)
        kubeconfig = tmp_path / f"{user}.kubeconfig"
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


def test_kueues_visibility_api_in_kueue_api_mode(
    control_plane: LocalCluster, namespace: str, kueue_queues: str, tmp_path: Path
) -> None:
    """In Kueue-API mode, over Kueue's own objects, the operator serves Kueue's group at the
    paths Kueue's clients use (v1beta2 and v1beta1), with explain's positions and view's RBAC."""
    config = OperatorConfig(visibility=VisibilitySettings(0), queue=QueueConfig(api_mode="kueue"))
    with operator_thread(config, [namespace]):
        _check_pending_order(control_plane, namespace, kueue_queues, KUEUE_GROUP_VERSION, KUEUE)
        older = _items(
            control_plane,
            f"/apis/{KUEUE_VISIBILITY_GROUP}/v1beta1/clusterqueues/{kueue_queues}/pendingworkloads",
        )
        assert [i["metadata"]["name"] for i in older] == CQ_ORDER
        cq_path = f"{KUEUE_GROUP_VERSION}/clusterqueues/{kueue_queues}/pendingworkloads"
        user = _refused_without_view(control_plane, namespace, cq_path, tmp_path)
        assert _direct(control_plane, cq_path, user, f"v1beta2.{KUEUE_VISIBILITY_GROUP}") == 403
        lq_path = f"{KUEUE_GROUP_VERSION}/namespaces/{namespace}/localqueues/lq-a/pendingworkloads"
        refused = _raw(control_plane, lq_path, tmp_path / f"{user}.kubeconfig")
        assert refused.returncode != 0 and "Forbidden" in refused.stderr, refused.stderr
    for version in ("v1beta2", "v1beta1"):
        gone = control_plane.kubectl("get", "apiservices", f"{version}.{KUEUE_VISIBILITY_GROUP}", check=False)
        assert gone.returncode != 0, f"the operator left its {version} APIService registered"


def _holder(cluster: LocalCluster, name: str) -> str | None:
    """The holder annotation of APIService `name`; None when there is none."""
    got = cluster.kubectl("get", "apiservices", name, "-o", "json", check=False)
    if got.returncode != 0:
        return None
    return json.loads(got.stdout)["metadata"].get("annotations", {}).get(HOLDER_ANNOTATION)


def _discovery_healthy(cluster: LocalCluster) -> bool:
    """`kubectl api-resources` (what the namespace controller's discovery does) has no error."""
    listed = cluster.kubectl("api-resources", "-o", "name", check=False)
    return listed.returncode == 0 and "unable to retrieve" not in listed.stderr


def test_a_killed_operators_apiservice_is_replaced_and_a_clean_stop_removes_it(
    control_plane: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """Several operators on one control plane, one registration: a live holder keeps it, a stop
    hands it over, a killed holder's is replaced by the next operator, the last stop removes it."""
    name = f"v1alpha1.{RAYQUOTA_VISIBILITY_GROUP}"
    dashboards = tmp_path / "dashboards.json"
    dashboards.write_text("{}")
    process = OperatorProcess(
        control_plane, tmp_path / "operator.log", dashboards, namespaces=namespace, webhooks=False
    )
    process.env["RAYQUOTA_VISIBILITY"] = "true"
    idle = [f"{namespace}-idle-*"]  # the in-process operators watch no namespace: only the API matters
    config = OperatorConfig(visibility=VisibilitySettings(0))
    try:
        with operator_thread(config, idle):
            first = wait_for(
                "the first operator to register", lambda: _holder(control_plane, name), timeout_s=30
            )
            assert f"-{os.getpid()}-" in first
            process.start().wait_reconciling()
            wait_for(
                "the second operator to see the registration held",
                lambda: "does not register it while that holds" in process.output(),
                timeout_s=30,
            )
            assert _holder(control_plane, name) == first, "a live holder's registration was taken"
        # The first stopped cleanly: its registration went; the other takes it within its re-check.
        wait_for(
            "the process to take the registration over",
            lambda: process.owns(_holder(control_plane, name)),
            timeout_s=30,
        )
        wait_for(
            "its API to answer", lambda: _raw(control_plane, GROUP_VERSION).returncode == 0, timeout_s=60
        )
        process.kill()
        stale = _raw(control_plane, GROUP_VERSION)
        assert stale.returncode != 0, "a killed operator's API still answered"
        with operator_thread(config, idle):
            third = wait_for(
                "a new operator to replace the dead registration",
                lambda: h if (h := _holder(control_plane, name)) and f"-{os.getpid()}-" in h else None,
                timeout_s=30,
            )
            assert third != first
            wait_for(
                "its API to answer", lambda: _raw(control_plane, GROUP_VERSION).returncode == 0, timeout_s=60
            )
            wait_for("discovery healthy", lambda: _discovery_healthy(control_plane), timeout_s=60)
        assert (
            _holder(control_plane, name) is None
            and control_plane.kubectl("get", "apiservices", name, check=False).returncode != 0
        )
        service = control_plane.kubectl(
            "get", "service", "-n", "kube-system", "rayquota-visibility", check=False
        )
        assert service.returncode != 0, "the loopback Service outlived every registration naming it"
        assert not process.tracebacks(), process.tracebacks()
    finally:
        process.kill()
