"""The tests' direct reads (tests/direct_api.py) answer what `kubectl get -o json` answers, and
leave to kubectl what they cannot resolve for certain."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from rayquota.localcluster.cluster import ClusterError, LocalCluster
from tests.direct_api import LAST_APPLIED, get_as_kubectl
from tests.integration.ray.kubehelpers import Kube


def kubectl_json(control_plane: LocalCluster, *args: str) -> dict[str, Any] | None:
    got = control_plane.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(got.stdout) if got.returncode == 0 else None


def names(listed: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    assert listed is not None
    return [(i["apiVersion"], i["kind"], i["metadata"]["name"]) for i in listed["items"]]


def test_direct_reads_answer_what_kubectl_answers(control_plane: LocalCluster, namespace: str) -> None:
    for name, labels in (("first", {"side": "a"}), ("second", {"side": "b"})):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}
        control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(body))

    for word in ("configmap", "configmaps", "cm", "ConfigMap"):
        handled, direct = get_as_kubectl(control_plane, ["-n", namespace, word, "first"])
        assert handled, word
        assert direct == kubectl_json(control_plane, "-n", namespace, word, "first")
    lists = (
        ["-n", namespace, "cm"],
        ["-n", namespace, "configmaps", "-l", "side=b"],
        ["nodes"],
        ["clusterqueues.rayquota.io"],
        ["-n", namespace, "events"],
    )
    for args in lists:
        handled, direct = get_as_kubectl(control_plane, args)
        assert handled, args
        assert names(direct) == names(kubectl_json(control_plane, *args)), args

    # What kubectl fails on, the direct read answers None for.
    assert get_as_kubectl(control_plane, ["-n", namespace, "cm", "missing"]) == (True, None)
    assert kubectl_json(control_plane, "-n", namespace, "cm", "missing") is None
    # What it cannot answer for certain is left to kubectl.
    for args in (["no-such-kind"], ["cm", "-o", "yaml"], ["cm/first"], ["cm", "first", "-l", "side=a"]):
        assert get_as_kubectl(control_plane, args) == (False, None), args


def test_a_direct_create_is_what_kubectl_apply_creates(control_plane: LocalCluster, namespace: str) -> None:
    """Kube.apply of a new object creates it directly: kubectl's next apply of the same object
    merges against it as against its own (a label dropped from the manifest is removed), and a
    field the schema does not know is refused as kubectl's strict validation refuses it."""
    kube = Kube(control_plane, namespace)
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "applied", "labels": {"keep": "yes", "drop": "yes"}},
        "data": {"a": "1"},
    }
    kube.apply(manifest)
    created = kube.get("configmap", "applied")
    assert created is not None and created["data"] == {"a": "1"}
    kubectl_made = {**manifest, "metadata": {**manifest["metadata"], "name": "by-kubectl"}}
    control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(kubectl_made))
    theirs = kube.get("configmap", "by-kubectl")
    assert theirs is not None
    recorded = json.loads(created["metadata"]["annotations"][LAST_APPLIED])
    assert recorded == {
        **json.loads(theirs["metadata"]["annotations"][LAST_APPLIED]),
        "metadata": recorded["metadata"],
    }
    assert recorded["metadata"] == {**manifest["metadata"], "namespace": namespace}

    manifest["metadata"]["labels"] = {"keep": "yes"}
    manifest["data"] = {"a": "2"}
    control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest))
    merged = kube.get("configmap", "applied")
    assert (
        merged is not None
        and merged["metadata"]["labels"] == {"keep": "yes"}
        and merged["data"] == {"a": "2"}
    )

    with pytest.raises(ClusterError) as refused:
        kube.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}, "datum": {}})
    assert 'unknown field "datum"' in str(refused.value)
    assert kube.get("configmap", "bad") is None


def test_direct_patches_are_kubectl_patches(control_plane: LocalCluster, namespace: str) -> None:
    """Kube.patch and patch_status send what `kubectl patch` sends; a refusal is kubectl's error."""
    kube = Kube(control_plane, namespace)
    kube.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}, "data": {"a": "1"}})
    kube.patch("configmap", "p", {"data": {"b": "2"}})
    kube.patch("cm", "p", [{"op": "remove", "path": "/data/a"}], kind_of_patch="json")  # type: ignore[arg-type]
    patched = kube.get("configmap", "p")
    assert patched is not None and patched["data"] == {"b": "2"}
    managers = kube_managers(control_plane, namespace, "configmap", "p")
    assert "kubectl-patch" in managers, managers

    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"}, "spec": HEAD_ONLY}
    kube.apply(cluster)
    kube.patch_status("raycluster", "rc", {"status": {"state": "ready"}})
    stored = kube.get("raycluster", "rc")
    assert stored is not None and stored["status"]["state"] == "ready"
    kube.patch("raycluster", "rc", {"spec": {"suspend": True}})
    stored = kube.get("raycluster", "rc")
    assert stored is not None and stored["spec"]["suspend"] is True and stored["status"]["state"] == "ready"

    with pytest.raises(ClusterError) as refused:
        kube.patch("configmap", "missing", {"data": {"b": "2"}})
    assert "NotFound" in str(refused.value) and "missing" in str(refused.value)


HEAD_ONLY = {
    "headGroupSpec": {
        "rayStartParams": {},
        "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0"}]}},
    }
}


def kube_managers(control_plane: LocalCluster, namespace: str, kind: str, name: str) -> list[str]:
    shown = control_plane.kubectl("get", "-n", namespace, kind, name, "-o", "json", "--show-managed-fields")
    return [entry["manager"] for entry in json.loads(shown.stdout)["metadata"]["managedFields"]]
