"""The tests' direct reads (tests/api_reader.py) answer what `kubectl get -o json` answers, and
leave to kubectl what they cannot resolve for certain."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from rayquota.localcluster.cluster import ClusterError, LocalCluster
from tests.api_reader import LAST_APPLIED, get_as_kubectl
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
