from __future__ import annotations

import copy
import json
from typing import Any

from rayquota.operator.ray.builders import hashing, services
from tests.unit.ray.fixtures import cluster


def test_head_service_ports_selector_and_owner() -> None:
    svc = services.build_head_service(cluster())
    assert svc["metadata"]["name"] == "demo-head-svc"
    assert svc["metadata"]["namespace"] == "team-a"
    assert svc["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert svc["spec"]["selector"] == {
        "ray.io/cluster": "demo",
        "ray.io/node-type": "head",
        "ray.io/identifier": "demo-head",
        "app.kubernetes.io/created-by": "kuberay-operator",
        "app.kubernetes.io/name": "kuberay",
    }
    ports = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
    assert ports == {"gcs-server": 6379, "dashboard": 8265, "client": 10001, "metrics": 8080, "serve": 8000}
    assert svc["spec"]["type"] == "ClusterIP"


def test_head_service_follows_container_ports_and_service_type() -> None:
    body = cluster()
    body["spec"]["headGroupSpec"]["serviceType"] = "NodePort"
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "dashboard", "containerPort": 9265}
    ]
    svc = services.build_head_service(body)
    assert {p["name"]: p["port"] for p in svc["spec"]["ports"]}["dashboard"] == 9265
    assert svc["spec"]["type"] == "NodePort"


def test_serve_service_only_when_asked() -> None:
    body = cluster()
    assert not services.wants_serve_service(body)
    body["metadata"]["annotations"] = {"ray.io/enable-serve-service": "true"}
    assert services.wants_serve_service(body)
    svc = services.build_serve_service(body)
    assert svc["metadata"]["name"] == "demo-serve-svc"
    assert svc["spec"]["ports"] == [{"name": "serve", "port": 8000, "targetPort": 8000, "protocol": "TCP"}]
    assert svc["spec"]["type"] == "ClusterIP"


def test_hash_ignores_scaling_suspend_strategy_and_injected_placement() -> None:
    base = cluster()
    original = hashing.spec_hash(base["spec"])
    changed = copy.deepcopy(base["spec"])
    group = changed["workerGroupSpecs"][0]
    group.update(replicas=4, minReplicas=0, maxReplicas=10, scaleStrategy={"workersToDelete": ["p1"]})
    changed["suspend"] = True
    changed["upgradeStrategy"] = {"type": "Recreate"}
    group["template"]["spec"]["tolerations"].append({"key": "flavor", "operator": "Exists"})
    group["template"]["spec"]["nodeSelector"] = {"pool": "a100"}
    assert hashing.spec_hash(changed) == original


def test_hash_changes_with_image_resources_or_start_params() -> None:
    base = cluster()["spec"]
    original = hashing.spec_hash(base)
    for mutate in (
        lambda s: s["headGroupSpec"]["template"]["spec"]["containers"][0].update(image="ray:other"),
        lambda s: s["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"].update(
            cpu="4"
        ),
        lambda s: s["workerGroupSpecs"][0]["rayStartParams"].update({"num-cpus": "1"}),
        lambda s: s["workerGroupSpecs"].append(copy.deepcopy(s["workerGroupSpecs"][0]) | {"groupName": "b"}),
    ):
        changed = copy.deepcopy(base)
        mutate(changed)
        assert hashing.spec_hash(changed) != original


# A spec and the hash every operator release must give it. Clusters carry the hash they were
# built from; if it changed between releases (or with the process's hash seed), upgrading the
# operator would restart every cluster under the Recreate strategy.
PINNED_SPEC: dict[str, Any] = {
    "rayVersion": "2.60.0",
    "headGroupSpec": {
        "rayStartParams": {"num-cpus": "0"},
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "ray-head",
                        "image": "rayproject/ray:2.60.0",
                        "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
                    }
                ]
            }
        },
    },
    "workerGroupSpecs": [
        {
            "groupName": "gpu",
            "replicas": 2,
            "rayStartParams": {},
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "ray-worker",
                            "image": "rayproject/ray:2.60.0",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ]
                }
            },
        }
    ],
}
PINNED_HASH = "cc6c748dbbd8c02b73a59560bf183467"


def test_hash_of_a_known_spec_never_changes() -> None:
    assert hashing.spec_hash(PINNED_SPEC) == PINNED_HASH


def _keys_reversed(value: Any) -> Any:
    """The same document with the keys of every mapping, at every depth, in reverse order."""
    if isinstance(value, dict):
        return {key: _keys_reversed(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_keys_reversed(item) for item in value]
    return value


def test_hash_ignores_key_order_at_every_depth() -> None:
    spec = cluster()["spec"]
    reordered = _keys_reversed(spec)
    assert reordered == spec and json.dumps(reordered) != json.dumps(spec)  # same content, other order
    assert hashing.spec_hash(reordered) == hashing.spec_hash(spec)


def test_autoscaler_rbac_named_after_cluster() -> None:
    from rayquota.operator.ray.builders import rbac

    objects = dict(rbac.build_autoscaler_rbac(cluster(enableInTreeAutoscaling=True)))
    assert set(objects) == {"serviceaccounts", "roles", "rolebindings"}
    assert objects["serviceaccounts"]["metadata"]["name"] == "demo"
    assert {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get", "patch"]} in objects[
        "roles"
    ]["rules"]
    assert objects["rolebindings"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "demo", "namespace": "team-a"}
    ]
    assert objects["rolebindings"]["roleRef"]["name"] == "demo"


def test_autoscaler_rbac_uses_the_users_service_account() -> None:
    from rayquota.operator.ray.builders import rbac

    body = cluster(enableInTreeAutoscaling=True)
    body["spec"]["headGroupSpec"]["template"]["spec"]["serviceAccountName"] = "mine"
    objects = dict(rbac.build_autoscaler_rbac(body))
    assert "serviceaccounts" not in objects
    assert objects["rolebindings"]["subjects"][0]["name"] == "mine"
