"""The generated CRDs: committed output matches the models, schemas are structural, rules exist."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from copy import deepcopy
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.api import crdgen
from rayquota.api.common import NON_NEGATIVE_QUANTITY_PATTERN

CRDS = Path(__file__).resolve().parents[3] / "crds"


def test_committed_crds_match_the_models_run_rayquota_crds_if_this_fails(tmp_path: Path) -> None:
    crdgen.generate(tmp_path)
    fresh = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    committed = {p.name: p.read_bytes() for p in CRDS.glob("*.yaml")}
    assert sorted(committed) == sorted(fresh), "crds/ is out of date: run `rayquota crds`"
    for name, content in fresh.items():
        assert committed[name] == content, f"crds/{name} is out of date: run `rayquota crds`"


CHART = CRDS.parent / "helm" / "rayquota"


def test_the_charts_crds_are_copies_of_the_generated_ones_not_links() -> None:
    copies = crdgen.chart_copies(CHART)
    assert set(copies) == {p.name for p in CRDS.glob("*.yaml")}
    for name, copy in copies.items():
        assert not copy.is_symlink(), f"{copy} is a link: Helm warns about it on every command"
        assert copy.read_bytes() == (CRDS / name).read_bytes(), f"{copy} is out of date: run `rayquota crds`"
    assert {p.parent.parent.name for p in copies.values() if p.name.startswith("ray.io_")} == {"ray-crds"}


def test_check_mode_refuses_a_linked_chart_copy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chart = tmp_path / "chart"
    crdgen.generate(tmp_path / "crds", chart)
    assert crdgen.main(tmp_path / "crds", check=True, chart_dir=chart) == 0
    linked = chart / "crds" / "rayquota.io_cohorts.yaml"
    linked.unlink()
    linked.symlink_to(tmp_path / "crds" / "rayquota.io_cohorts.yaml")
    assert crdgen.main(tmp_path / "crds", check=True, chart_dir=chart) == 1
    assert "rayquota.io_cohorts.yaml is a symbolic link" in capsys.readouterr().err
    crdgen.generate(tmp_path / "crds", chart)  # replaces the link, never writes through it
    assert not linked.is_symlink() and crdgen.main(tmp_path / "crds", check=True, chart_dir=chart) == 0


def test_generation_is_deterministic(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    crdgen.generate(first)
    crdgen.generate(second)
    for path in first.iterdir():
        assert path.read_bytes() == (second / path.name).read_bytes()


def test_check_mode_names_the_drifting_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crdgen.generate(tmp_path)
    assert crdgen.main(tmp_path, check=True) == 0
    target = tmp_path / "rayquota.io_clusterqueues.yaml"
    target.write_text(target.read_text().replace("StrictFIFO", "StrictFifo"))
    (tmp_path / "ray.io_rayjobs.yaml").unlink()
    assert crdgen.main(tmp_path, check=True) == 1
    err = capsys.readouterr().err
    assert "rayquota.io_clusterqueues.yaml differs" in err
    assert "ray.io_rayjobs.yaml is missing" in err
    assert "rayquota crds" in err


@functools.cache
def _parsed_crds() -> tuple[dict[str, Any], ...]:
    # The C parser where PyYAML has it: the ray.io CRDs carry Kubernetes' pod schemas (megabytes).
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple(yaml.load(p.read_text(), Loader=loader) for p in sorted(CRDS.glob("*.yaml")))


def _crds() -> list[dict[str, Any]]:
    return deepcopy(list(_parsed_crds()))


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, child in schema.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}.*")


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize("crd", _crds(), ids=lambda c: c["metadata"]["name"])
def test_schema_is_structural(crd: dict[str, Any]) -> None:
    for path, node in _nodes(_schema(crd)):
        assert "$ref" not in node and "title" not in node, path
        if node.get("x-kubernetes-int-or-string"):
            assert "type" not in node, path
            continue
        assert "type" in node, f"{crd['metadata']['name']}{path} has no type"
        assert "anyOf" not in node and "oneOf" not in node, path
        assert not ("properties" in node and "additionalProperties" in node), path
        if "default" in node:
            assert not path.startswith(".status"), path


def test_metadata_is_opaque_and_status_is_a_subresource() -> None:
    for crd in _crds():
        assert _schema(crd)["properties"]["metadata"] == {"type": "object"}
        version = crd["spec"]["versions"][0]
        if crd["spec"]["names"]["kind"] not in (
            "ResourceFlavor",
            "WorkloadPriorityClass",
            "Topology",
            "MultiKueueConfig",
        ):
            assert version["subresources"] == {"status": {}}


def _by_kind() -> dict[str, dict[str, Any]]:
    return {c["spec"]["names"]["kind"]: c for c in _crds()}


def test_short_names_and_scopes() -> None:
    crds = _by_kind()
    expected = {
        "ClusterQueue": (["cq"], "Cluster"),
        "LocalQueue": (["lq"], "Namespaced"),
        "Workload": (["wl"], "Namespaced"),
        "ResourceFlavor": (["rf"], "Cluster"),
        "WorkloadPriorityClass": (["wpc"], "Cluster"),
        "Cohort": (None, "Cluster"),
        "RayCluster": (None, "Namespaced"),
        "RayJob": (None, "Namespaced"),
        "RayService": (None, "Namespaced"),
    }
    for kind, (short, scope) in expected.items():
        assert crds[kind]["spec"]["names"].get("shortNames") == short, kind
        assert crds[kind]["spec"]["scope"] == scope, kind


def test_printer_columns() -> None:
    crds = _by_kind()

    def columns(kind: str) -> list[str]:
        return [c["name"] for c in crds[kind]["spec"]["versions"][0]["additionalPrinterColumns"]]

    assert {"Cohort", "Pending Workloads", "Admitted Workloads", "Active"} <= set(columns("ClusterQueue"))
    assert {"ClusterQueue", "Pending Workloads", "Admitted Workloads"} <= set(columns("LocalQueue"))
    assert {"Queue", "Admitted by", "Age"} <= set(columns("Workload"))
    assert {"job status", "deployment status", "start time", "end time"} <= set(columns("RayJob"))
    assert {"desired workers", "available workers", "gpus", "status"} <= set(columns("RayCluster"))
    assert {"service status", "num serve endpoints"} <= set(columns("RayService"))


def _at(crd: dict[str, Any], dotted: str) -> dict[str, Any]:
    node = _schema(crd)
    for part in dotted.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


def _rules(node: dict[str, Any]) -> list[str]:
    return [v["rule"] for v in node.get("x-kubernetes-validations", [])]


def test_cross_field_rules_exist() -> None:
    crds = _by_kind()
    options = _at(crds["RayService"], "spec.upgradeStrategy.clusterUpgradeOptions")
    assert any("stepSizePercent <= self.maxSurgePercent" in r for r in _rules(options))
    assert options["properties"]["maxSurgePercent"]["default"] == 100
    assert any("borrowingLimit" in r and "cohort" in r for r in _rules(_at(crds["ClusterQueue"], "spec")))
    group = _at(crds["RayCluster"], "spec.workerGroupSpecs.[]")
    assert any("minReplicas <= self.maxReplicas" in r for r in _rules(group))
    assert group["required"] == ["groupName", "template"]
    assert _at(crds["RayCluster"], "spec")["required"] == ["headGroupSpec"]
    assert _at(crds["RayService"], "spec.upgradeStrategy.type")["enum"] == [
        "NewCluster",
        "NewClusterWithIncrementalUpgrade",
        "None",
    ]
    assert _at(crds["RayCluster"], "spec.upgradeStrategy.type")["enum"] == ["Recreate", "None"]


def test_quota_quantities_forbid_a_leading_minus() -> None:
    quota = _at(_by_kind()["ClusterQueue"], "spec.resourceGroups.[].flavors.[].resources.[].nominalQuota")
    assert quota["x-kubernetes-int-or-string"] is True
    assert quota["pattern"].startswith("^\\+?(")
    assert quota["minimum"] == 0


def test_lists_under_cel_rules_are_bounded() -> None:
    group = _at(_by_kind()["ClusterQueue"], "spec.resourceGroups")
    assert group["maxItems"] == 16
    assert group["items"]["properties"]["flavors"]["maxItems"] == 16
    assert group["items"]["properties"]["flavors"]["items"]["properties"]["resources"]["maxItems"] == 16


def test_pod_templates_carry_kubernetes_schema_with_non_negative_quantities() -> None:
    """The Ray kinds' pod templates carry Kubernetes' own schema (as KubeRay's CRDs do); the
    Workload's stays free-form. In both, the quantities the queue counts are checked by the API
    server: a malformed or negative one is refused there by name (fuzzing found them crashing the
    operator's parsers, tests/integration/fuzz)."""
    for kind, at, free_form in (
        ("RayCluster", "spec.headGroupSpec.template", False),
        ("RayJob", "spec.submitterPodTemplate", False),
        ("Workload", "spec.podSets[].template", True),
    ):
        template = _at(_by_kind()[kind], at.replace("[]", ".[]"))
        assert template["type"] == "object"
        assert template.get("x-kubernetes-preserve-unknown-fields", False) is free_form, kind
        spec = template["properties"]["spec"]
        assert spec.get("x-kubernetes-preserve-unknown-fields", False) is free_form, kind
        if not free_form:
            assert spec["required"] == ["containers"]
            assert "volumes" in spec["properties"] and "affinity" in spec["properties"]
        for containers in ("containers", "initContainers"):
            resources = spec["properties"][containers]["items"]["properties"]["resources"]
            for amounts in ("requests", "limits"):
                quantity = resources["properties"][amounts]["additionalProperties"]
                assert quantity["pattern"] == NON_NEGATIVE_QUANTITY_PATTERN and quantity["minimum"] == 0
        overhead = spec["properties"]["overhead"]["additionalProperties"]
        assert overhead["pattern"] == NON_NEGATIVE_QUANTITY_PATTERN
