"""Every manifest under samples/ is accepted unchanged by the real API server and survives pruning."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.sample_documents import SAMPLES, sample_documents

CLUSTER_SCOPED = {
    "ResourceFlavor",
    "ClusterQueue",
    "Cohort",
    "WorkloadPriorityClass",
    "MultiKueueConfig",
    "MultiKueueCluster",
}


DOCUMENTS = sample_documents()


def _missing(sample: Any, stored: Any, path: str = "") -> list[str]:
    """Paths of the sample that the stored object lacks or holds with a different value."""
    if isinstance(sample, dict):
        if not isinstance(stored, dict):
            return [path or "<root>"]
        problems = []
        for key, value in sample.items():
            if key not in stored:
                problems.append(f"{path}.{key} was pruned")
            else:
                problems.extend(_missing(value, stored[key], f"{path}.{key}"))
        return problems
    if isinstance(sample, list):
        if not isinstance(stored, list) or len(stored) != len(sample):
            return [f"{path} changed length"]
        return [
            p
            for i, (a, b) in enumerate(zip(sample, stored, strict=True))
            for p in _missing(a, b, f"{path}[{i}]")
        ]
    return [] if sample == stored else [f"{path}: {sample!r} became {stored!r}"]


@pytest.mark.parametrize(("where", "doc"), DOCUMENTS, ids=[w for w, _ in DOCUMENTS])
def test_sample_is_created_and_nothing_is_pruned(
    control_plane: Any, crds_installed: None, namespace: str, where: str, doc: dict[str, Any]
) -> None:
    doc = json.loads(json.dumps(doc))
    kind = doc["kind"]
    if kind in CLUSTER_SCOPED:
        # Cluster-scoped names are shared by every test: give this copy a name of its own.
        doc["metadata"]["name"] = f"{doc['metadata']['name']}-{namespace}"[:63]
    else:
        # Namespaced samples are created in the test's namespace instead of the one they name.
        doc["metadata"]["namespace"] = namespace
    kubectl = control_plane.kubectl
    created = kubectl("create", "-f", "-", "-o", "json", input=json.dumps(doc), check=False)
    assert created.returncode == 0, f"{where} rejected: {created.stderr}"
    ns_args = [] if kind in CLUSTER_SCOPED else ["-n", namespace]
    try:
        stored = json.loads(
            kubectl(
                "get",
                f"{doc['kind'].lower()}.{doc['apiVersion'].split('/')[0]}",
                doc["metadata"]["name"],
                *ns_args,
                "-o",
                "json",
            ).stdout
        )
        body = {k: v for k, v in doc.items() if k not in ("metadata", "apiVersion", "kind")}
        stored_body = {k: v for k, v in stored.items() if k not in ("metadata", "apiVersion", "kind")}
        assert _missing(body, stored_body) == [], where
        assert stored["metadata"].get("labels", {}) == doc["metadata"].get("labels", {})
    finally:
        if kind in CLUSTER_SCOPED:
            kubectl(
                "delete", kind.lower() + ".rayquota.io", doc["metadata"]["name"], "--wait=false", check=False
            )


def test_defaults_are_applied_by_the_api_server(
    control_plane: Any, crds_installed: None, namespace: str
) -> None:
    doc = yaml.safe_load((SAMPLES / "ray-cluster.complete.yaml").read_text())
    doc["metadata"]["namespace"] = namespace
    control_plane.kubectl("create", "-f", "-", input=json.dumps(doc))
    stored = json.loads(
        control_plane.kubectl(
            "get", "rayclusters.ray.io", doc["metadata"]["name"], "-n", namespace, "-o", "json"
        ).stdout
    )
    groups = {g["groupName"]: g for g in stored["spec"]["workerGroupSpecs"]}
    assert "numOfHosts" not in doc["spec"]["workerGroupSpecs"][1]
    assert groups["cpu-small"]["numOfHosts"] == 1
    assert stored["spec"]["autoscalerOptions"] == doc["spec"]["autoscalerOptions"]
