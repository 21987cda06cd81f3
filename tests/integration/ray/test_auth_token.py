"""Token auth (authOptions.mode: token) against a real Ray head with token auth on (Ray 2.60).

The operator makes the cluster's Secret and puts the token in every Ray container's env; a real
head, started with the env of the head pod the operator built, refuses requests without it. The
operator's own calls (job submission and status for a RayJob, the Serve deploy for a RayService)
then get through only because they carry the token from the Secret.
"""

from __future__ import annotations

import base64
import copy
import secrets
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rayquota.operator.config import OperatorConfig
from tests.integration.ray.kubehelpers import Kube, condition, wait_for
from tests.integration.ray.podenv import container_env
from tests.integration.ray.rayhead import RayHead
from tests.integration.ray.rayservice_support import Dashboards, serve_config

pytestmark = [pytest.mark.ray, pytest.mark.starts_ray_heads]

SHARED_SECRET = "shared-token"
RAY_VERSION = "2.60.0"


@pytest.fixture
def kube(control_plane: Any, namespace: str, ray_operator: OperatorConfig) -> Kube:
    return Kube(control_plane, namespace)


def cluster_spec(auth: dict[str, Any]) -> dict[str, Any]:
    container = {"name": "ray-head", "image": f"rayproject/ray:{RAY_VERSION}",
                 "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}  # fmt: skip
    worker = dict(container, name="ray-worker")
    return {
        "rayVersion": RAY_VERSION,
        "authOptions": auth,
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container]}}},
        "workerGroupSpecs": [
            {
                "groupName": "small", "replicas": 1, "minReplicas": 1, "maxReplicas": 1, "rayStartParams": {},
                "template": {"spec": {"containers": [worker]}},
            }
        ],
    }  # fmt: skip


def raycluster(name: str, auth: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": cluster_spec(auth),
    }


def pod_of(kube: Kube, cluster: str, node_type: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        pods = [p for p in kube.pods(cluster) if p["metadata"]["labels"]["ray.io/node-type"] == node_type]
        return pods[0] if pods else None

    return wait_for(f"a {node_type} pod of {cluster}", probe, 60)


def status_code(url: str, token: str | None = None) -> int:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("x-ray-authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_the_operator_makes_the_secret_and_gives_every_ray_container_the_token(kube: Kube) -> None:
    kube.apply(raycluster("authed-gen", {"mode": "token"}))
    secret = wait_for("the token Secret", lambda: kube.get("secret", "authed-gen"), 60)
    token = base64.b64decode(base64.b64decode(secret["data"]["auth_token"]))
    assert len(token) == 32
    cluster = kube.get("raycluster", "authed-gen")
    assert cluster is not None
    assert secret["metadata"]["ownerReferences"][0]["uid"] == cluster["metadata"]["uid"]
    assert secret["metadata"]["labels"] == {"ray.io/cluster": "authed-gen"}
    ref = {"secretKeyRef": {"name": "authed-gen", "key": "auth_token"}}
    worker = pod_of(kube, "authed-gen", "worker")
    for container in [
        pod_of(kube, "authed-gen", "head")["spec"]["containers"][0],
        *worker["spec"]["initContainers"],
    ]:
        env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
        assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN"] == ref, container["name"]
    # The token is made once: a later reconcile keeps it.
    kube.patch("raycluster", "authed-gen", {"metadata": {"labels": {"touched": "yes"}}})
    wait_for(
        "the touched cluster reconciled",
        lambda: (
            (kube.get("raycluster", "authed-gen") or {}).get("metadata", {}).get("labels", {}).get("touched")
        ),
    )
    assert kube.get("secret", "authed-gen")["data"] == secret["data"]  # type: ignore[index]


@pytest.fixture
def token_head(kube: Kube, dashboard_map_file: Path, namespace: str) -> Iterator[tuple[RayHead, str]]:
    """A real head with token auth, started with the env of the `authed` cluster's head pod (the
    token from the user's Secret), and every cluster of the namespace mapped to it."""
    token = secrets.token_urlsafe(24)
    kube.kubectl("create", "secret", "generic", SHARED_SECRET, f"--from-literal=auth_token={token}")
    kube.apply(raycluster("authed", {"mode": "token", "secretName": SHARED_SECRET}))
    pod = pod_of(kube, "authed", "head")
    env = container_env(kube, pod, pod["spec"]["containers"][0])
    assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN"] == token
    head_env = {name: env[name] for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    head = RayHead(num_cpus=2, env=head_env)
    head.start(timeout_s=180)
    routes = Dashboards(dashboard_map_file, namespace)
    routes.route("*", head.dashboard_url)
    try:
        yield head, token
    finally:
        routes.clear()
        head.stop()


def test_the_operators_dashboard_and_serve_calls_carry_the_token(
    kube: Kube, token_head: tuple[RayHead, str]
) -> None:
    head, token = token_head
    jobs = f"{head.dashboard_url}/api/jobs/"
    assert status_code(jobs) == 401  # token auth is really on
    assert status_code(jobs, "not-the-token") == 403
    assert status_code(jobs, token) == 200

    kube.apply(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {"name": "authed-job"},
            "spec": {
                "entrypoint": "python -c \"print('hello with a token')\"",
                "submissionMode": "HTTPMode",
                "clusterSelector": {"ray.io/cluster": "authed"},
            },
        }
    )

    def finished() -> dict[str, Any] | None:
        status = (kube.get("rayjob", "authed-job") or {}).get("status") or {}
        return status if status.get("jobDeploymentStatus") in ("Complete", "Failed") else None

    status = wait_for("the RayJob finished", finished, 180)
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED"), status

    spec = cluster_spec({"mode": "token", "secretName": SHARED_SECRET})
    kube.apply(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayService",
            "metadata": {"name": "authed-svc"},
            "spec": {"serveConfigV2": serve_config("with a token"), "rayClusterConfig": copy.deepcopy(spec)},
        }
    )

    def ready() -> dict[str, Any] | None:
        obj = kube.get("rayservice", "authed-svc") or {}
        cond = condition(obj, "Ready")
        return obj if cond and cond["status"] == "True" else None

    obj = wait_for("the RayService Ready", ready, 180)
    app = obj["status"]["activeServiceStatus"]["applicationStatuses"]["greeter"]
    assert app["status"] == "RUNNING"
