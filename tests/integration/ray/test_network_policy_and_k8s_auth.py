"""``spec.networkPolicy`` (KubeRay v1.7.0's RayClusterNetworkPolicy gate on) and
``authOptions.enableK8sTokenAuth`` on the local control plane, with an operator of this module's
own whose gate is on (the folder's operator runs with KubeRay's default gates, under which
``networkPolicy`` is refused).

The NetworkPolicies are compared whole with the ones KubeRay's controller builds (names, labels,
controller reference, selectors, policy types, rules in order), as the API server stores them.
benchmarks/kuberay_network_policy.py measures the same against KubeRay v1.7.0's real operator (run
by hand; docs/kuberay-compatibility.md records the result: no difference).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from rayquota.operator.config import OperatorConfig
from rayquota.operator.feature_gates import FeatureGates
from tests.integration.ray.kubehelpers import Kube
from tests.operator_thread import operator_thread
from tests.polling import wait_for

pytestmark = pytest.mark.ray

PREFIX = "rqsec"
DNS_EGRESS = {
    "to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
    "ports": [{"protocol": "UDP", "port": 53}],
}
FROM_MONITORING = {"from": [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}]}


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


@pytest.fixture(scope="module")
def gated_operator(crds_installed: None) -> Iterator[None]:
    config = OperatorConfig(
        version="test-1", feature_gates=FeatureGates.parse("RayClusterNetworkPolicy=true")
    )
    with operator_thread(config, [f"{PREFIX}-*"]):
        yield


@pytest.fixture
def kube(control_plane: Any, namespace: str, gated_operator: None) -> Kube:
    return Kube(control_plane, namespace)


def container(name: str) -> dict[str, Any]:
    return {"name": name, "image": "rayproject/ray:2.60.0", "resources": {"requests": {"cpu": "100m"}}}


def raycluster(name: str, groups: list[str], **spec: Any) -> dict[str, Any]:
    head = {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head")]}}}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "rayVersion": "2.60.0",
            "headGroupSpec": head,
            "workerGroupSpecs": [
                {
                    "groupName": group, "replicas": 1, "minReplicas": 0, "maxReplicas": 2,
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [container("ray-worker")]}},
                }
                for group in groups
            ],
            **spec,
        },
    }  # fmt: skip


def kuberay_policy(
    cluster: dict[str, Any], group: str | None, ingress: list[Any], egress: list[Any]
) -> dict[str, Any]:
    """KubeRay v1.7.0's policy for the head (``group`` None) or a worker group, under DenyAll."""
    name = cluster["metadata"]["name"]
    if group is None:
        selector = {"ray.io/cluster": name, "ray.io/node-type": "head"}
    else:
        selector = {"ray.io/cluster": name, "ray.io/node-type": "worker", "ray.io/group": group}
    same = {"podSelector": {"matchLabels": {"ray.io/cluster": name}}}
    return {
        "name": f"{name}-head" if group is None else f"{name}-workers-{group}",
        "labels": {
            "ray.io/cluster": name,
            "ray.io/group": group or "headgroup",
            "app.kubernetes.io/name": "kuberay",
            "app.kubernetes.io/created-by": "kuberay-operator",
        },
        "owner": {"kind": "RayCluster", "name": name, "uid": cluster["metadata"]["uid"], "controller": True},
        "spec": {
            "podSelector": {"matchLabels": selector},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [same]}, *ingress],
            "egress": [{"to": [same]}, *egress],
        },
    }


def stored_policies(kube: Kube, cluster: str) -> dict[str, dict[str, Any]]:
    out = {}
    for policy in kube.list("networkpolicies", f"ray.io/cluster={cluster}"):
        meta = policy["metadata"]
        [ref] = meta.get("ownerReferences") or [{}]
        out[meta["name"]] = {
            "name": meta["name"],
            "labels": meta.get("labels"),
            "owner": {key: ref.get(key) for key in ("kind", "name", "uid", "controller")},
            "spec": policy["spec"],
        }
    return out


def test_network_policies_are_kuberays_and_follow_the_spec(kube: Kube) -> None:
    network_policy = {
        "mode": "DenyAll",
        "head": {"ingressRules": [FROM_MONITORING], "egressRules": [DNS_EGRESS]},
        "worker": {"egressRules": [DNS_EGRESS]},
        "workerGroups": [{"groupName": "gpu", "egressRules": []}],
    }
    kube.apply(raycluster("iso", ["cpu", "gpu"], networkPolicy=network_policy))
    cluster = wait_for("the RayCluster stored", lambda: kube.get("raycluster", "iso"))
    expected = {
        p["name"]: p
        for p in (
            kuberay_policy(cluster, None, [FROM_MONITORING], [DNS_EGRESS]),
            kuberay_policy(cluster, "cpu", [], [DNS_EGRESS]),
            kuberay_policy(cluster, "gpu", [], []),  # its entry replaces `worker`
        )
    }
    wait_for("KubeRay's three NetworkPolicies", lambda: stored_policies(kube, "iso") == expected or None, 60)
    kube.reasons_once("iso", {"CreatedNetworkPolicy"})

    # A worker group removed: its policy goes. The mode narrowed to ingress: no egress rules.
    kube.patch(
        "raycluster",
        "iso",
        [
            {"op": "remove", "path": "/spec/workerGroupSpecs/1"},
            {"op": "replace", "path": "/spec/networkPolicy/mode", "value": "DenyAllIngress"},
        ],
        kind_of_patch="json",
    )

    def ingress_only() -> dict[str, Any] | None:
        stored = stored_policies(kube, "iso")
        if set(stored) != {"iso-head", "iso-workers-cpu"}:
            return None
        specs = [p["spec"] for p in stored.values()]
        return stored if all(s["policyTypes"] == ["Ingress"] and "egress" not in s for s in specs) else None

    stored = wait_for("the gpu group's policy deleted, egress open", ingress_only, 60)
    assert stored["iso-head"]["spec"]["ingress"] == expected["iso-head"]["spec"]["ingress"]

    kube.patch("raycluster", "iso", [{"op": "remove", "path": "/spec/networkPolicy"}], kind_of_patch="json")
    wait_for("every policy deleted with spec.networkPolicy", lambda: stored_policies(kube, "iso") == {}, 60)


def test_a_policy_of_the_same_name_not_owned_is_left_alone_and_reported(kube: Kube) -> None:
    foreign = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "clash-head", "labels": {"ray.io/cluster": "clash"}},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }
    kube.apply(foreign)
    kube.apply(raycluster("clash", ["cpu"], networkPolicy={}))
    wait_for(
        "the collision reported",
        lambda: any(e["reason"] == "NetworkPolicyNameCollision" for e in kube.events("clash")),
        60,
    )
    live = kube.get("networkpolicy", "clash-head")
    assert live is not None and live["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    assert not live["metadata"].get("ownerReferences")


def test_kubernetes_token_auth_mounts_the_account_token_and_makes_no_secret(kube: Kube) -> None:
    kube.apply(raycluster("k8sauth", ["cpu"], authOptions={"mode": "token", "enableK8sTokenAuth": True}))
    pods = wait_for("the head and the worker", lambda: (p := kube.pods("k8sauth")) and len(p) == 2 and p, 60)
    mount = {"name": "ray-token", "mountPath": "/var/run/secrets/ray.io/serviceaccount", "readOnly": True}
    for pod in pods:
        volumes = [v for v in pod["spec"]["volumes"] if v["name"] == "ray-token"]
        assert (
            len(volumes) == 1
            and volumes[0]["projected"]["sources"][0]["serviceAccountToken"]["path"] == "token"
        )
        ray = pod["spec"]["containers"][0]
        env = {e["name"]: e.get("value", json.dumps(e.get("valueFrom"))) for e in ray.get("env") or []}
        assert env["RAY_AUTH_MODE"] == "token" and env["RAY_ENABLE_K8S_TOKEN_AUTH"] == "true", env
        assert "RAY_AUTH_TOKEN" not in env
        assert mount in ray["volumeMounts"]
    assert kube.get("secret", "k8sauth") is None  # the API server checks the tokens: no Secret
    cluster = kube.get("raycluster", "k8sauth")
    assert cluster is not None and cluster.get("status", {}).get("state") != "failed"


def test_kubernetes_token_auth_on_a_rayjob_is_refused_as_kuberay_refuses_it(kube: Kube) -> None:
    spec = raycluster("unused", ["cpu"], authOptions={"mode": "token", "enableK8sTokenAuth": True})["spec"]
    job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "authjob"},
        "spec": {"entrypoint": "python -c pass", "rayClusterSpec": spec},
    }
    kube.apply(job)
    status = wait_for(
        "the RayJob refused",
        lambda: (
            (s := (kube.get("rayjob", "authjob") or {}).get("status") or {}).get("jobDeploymentStatus")
            == "ValidationFailed"
            and s
        ),
        60,
    )
    assert "spec.rayClusterSpec.authOptions.enableK8sTokenAuth: true is refused" in status["message"]
    assert "KubeRay does not support Kubernetes token auth for a RayJob" in status["message"]
    assert kube.list("rayclusters") == []  # nothing was made for it
