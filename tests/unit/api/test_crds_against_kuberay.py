"""The generated ray.io CRDs against KubeRay v1.6.2's, field by field.

Every difference (a property only one side declares; a field's type, format, required fields, enum,
default, bounds, pattern, nullability or x-kubernetes-* marker) must be explained by an entry of the
allow-list in docs/kuberay-compatibility.md, and every entry must still explain something.
KubeRay's CRDs come from its module, which `make test` fetches (`rayquota peers build kuberay`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.api import k8s_openapi
from rayquota.api.crd_compare import Allowance, Difference, allowed, differences, schema_of
from rayquota.api.crdgen import crd_for
from rayquota.api.ray_v1 import RAY_KINDS
from rayquota.api.raycronjob_v1 import RayCronJob
from rayquota.localcluster import peers

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "kuberay-compatibility.md"
ROW = re.compile(r"^\| `(?P<path>[^`]*)` \| (?P<aspect>[^|]+?) \| (?P<why>.+) \|$")


def allow_list() -> list[Allowance]:
    text = DOC.read_text(encoding="utf-8")
    table = text.split("<!-- crd-allow-list:start -->", 1)[1].split("<!-- crd-allow-list:end -->", 1)[0]
    entries = []
    for line in table.splitlines():
        match = ROW.match(line.strip())
        if match:
            path = "" if match["path"] == "<root>" else match["path"]
            entries.append(Allowance(path, match["aspect"].strip(), match["why"].strip()))
    return entries


@pytest.fixture(scope="module")
def kuberay_crds() -> dict[str, dict[str, Any]]:
    try:
        crd_dir = peers.kuberay_crd_dir()
    except Exception as error:  # not fetched: only outside `make test`, which builds KubeRay first
        pytest.skip(f"KubeRay {peers.KUBERAY_VERSION}'s CRDs are not in the module cache ({error})")
    crds = {}
    for path in sorted(crd_dir.glob("ray.io_*.yaml")):
        crd = yaml.load(
            path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        )
        crds[crd["spec"]["names"]["kind"]] = crd
    return crds


@pytest.fixture(scope="module")
def all_differences(kuberay_crds: dict[str, dict[str, Any]]) -> list[tuple[str, Difference]]:
    """(kind, difference) for every difference between our four CRDs and KubeRay's."""
    found = []
    for kind in (*RAY_KINDS, RayCronJob):
        ours = crd_for(kind)
        theirs = kuberay_crds[kind.crd.kind]
        found += [(kind.crd.kind, d) for d in differences(schema_of(ours), schema_of(theirs))]
    return found


def test_every_kind_kuberay_has_is_generated(kuberay_crds: dict[str, dict[str, Any]]) -> None:
    assert set(kuberay_crds) == {kind.crd.kind for kind in (*RAY_KINDS, RayCronJob)}


def test_the_generated_crds_match_kuberays_but_for_the_explained_differences(
    all_differences: list[tuple[str, Difference]],
) -> None:
    entries = allow_list()
    assert len(entries) > 20, "the allow-list table in docs/kuberay-compatibility.md was not read"
    unexplained = [f"{kind} {d}" for kind, d in all_differences if allowed(d, entries) is None]
    assert not unexplained, (
        f"{len(unexplained)} differences from KubeRay's CRDs not explained in "
        "docs/kuberay-compatibility.md:\n" + "\n".join(unexplained[:60])
    )


def test_every_allow_list_entry_explains_a_difference(all_differences: list[tuple[str, Difference]]) -> None:
    found = [d for _, d in all_differences]
    stale = [f"`{e.path}` {e.aspect}" for e in allow_list() if not any(e.matches(d) for d in found)]
    assert not stale, f"allow-list entries that match no difference any more: {stale}"


def test_kubernetes_types_are_schemas_not_opaque(all_differences: list[tuple[str, Difference]]) -> None:
    """Where KubeRay declares a Kubernetes type's fields, so do we: no opaque node is allowed."""
    for kind, difference in all_differences:
        assert difference.aspect != "x-kubernetes-preserve-unknown-fields", f"{kind} {difference}"
        assert not (difference.aspect == "property" and difference.ours is None), f"{kind} {difference}"


def test_kuberays_defaults_are_declared() -> None:
    """The defaults the issue names: a port's protocol, a worker group's priority."""
    crd = schema_of(crd_for(RAY_KINDS[0]))
    group = crd["properties"]["spec"]["properties"]["workerGroupSpecs"]["items"]
    assert group["properties"]["priority"]["default"] == 0
    containers = group["properties"]["template"]["properties"]["spec"]["properties"]["containers"]
    assert containers["items"]["properties"]["ports"]["items"]["properties"]["protocol"]["default"] == "TCP"
    resources = crd["properties"]["spec"]["properties"]["autoscalerOptions"]["properties"]["resources"]
    assert "claims" in resources["properties"]  # pruned on apply before


def test_a_glob_stays_within_a_segment_unless_doubled() -> None:
    assert Allowance("spec.*", "*", "").matches(Difference("spec.suspend", "property", None, None))
    assert not Allowance("spec.*", "*", "").matches(Difference("spec.a.b", "property", None, None))
    assert Allowance("**.b[]", "enum", "").matches(Difference("spec.a.b[]", "enum", None, None))
    assert not Allowance("**.b[]", "enum", "").matches(Difference("spec.a.b[]", "default", None, None))


def test_the_stored_kubernetes_schemas_regenerate_from_their_source() -> None:
    """k8s_schemas.json is what `rayquota crds --k8s-openapi` writes from Kubernetes' OpenAPI."""
    module = peers.module_cache_path(k8s_openapi.SOURCE_MODULE, k8s_openapi.OPENAPI_VERSION)
    source = module / k8s_openapi.SOURCE_DIR
    if not source.is_dir():
        pytest.skip(f"{source} is not fetched (`rayquota crds --k8s-openapi` fetches it)")
    fresh = k8s_openapi.render(k8s_openapi.trimmed_schemas(k8s_openapi.read_definitions(source)))
    assert fresh == k8s_openapi.DATA_FILE.read_text(encoding="utf-8")
