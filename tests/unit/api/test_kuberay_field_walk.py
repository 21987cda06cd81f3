"""Every spec field of KubeRay v1.7.0's RayCluster, RayJob, RayService and RayCronJob is implemented
or warned.

The list of fields is checked in (tests/unit/api/kuberay_v1_7_0_spec_fields.txt, made by
tools/kuberay_spec_fields.py from KubeRay's Go types at v1.7.0). For each field:
- our CRD declares it, so the API server keeps it (a pruned field is lost silently);
- it is either warned on the object (rayquota.api.ray_unimplemented, listed in
  docs/kuberay-compatibility.md), or the operator reads it: its name occurs in the operator's
  code outside the models (a field no reconciler, builder or validation names cannot be acted on),
  or it is refused with an error naming it (checked here by running the validation).
A RayCronJob's `spec.jobTemplate.X` is its RayJobs' `spec.X`: the template is copied into each
RayJob unchanged (the plan's tests check the copy), so it is held to the RayJob's field.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.api.ray_unimplemented import IGNORED_FIELD_PATHS
from rayquota.operator.ray import gcs_ft

ROOT = Path(__file__).resolve().parents[3]
FIELDS = Path(__file__).with_name("kuberay_v1_7_0_spec_fields.txt")
CRDS = {
    "RayCluster": "ray.io_rayclusters.yaml",
    "RayJob": "ray.io_rayjobs.yaml",
    "RayService": "ray.io_rayservices.yaml",
    "RayCronJob": "ray.io_raycronjobs.yaml",
}
JOB_TEMPLATE = "spec.jobTemplate"
# Where a RayCluster spec sits inside each kind.
CLUSTER_SPEC_AT = {
    "RayCluster": "spec",
    "RayJob": "spec.rayClusterSpec",
    "RayService": "spec.rayClusterConfig",
    "RayCronJob": f"{JOB_TEMPLATE}.rayClusterSpec",
}
# The code that acts on objects: reconcilers, builders, validation, admission.
OPERATOR_CODE = ("rayquota/operator", "rayquota/queue", "rayquota/webhooks")
# Fields the operator hands over whole, by design: the Ray autoscaler reads them from the
# RayCluster object itself (KubeRay's operator does not read them either).
READ_BY_THE_RAY_AUTOSCALER = {"spec.workerGroupSpecs.priority", "spec.autoscalerOptions.upscalingMode"}


# Fields refused when set, with the error the validation gives (path in a RayCluster spec).
REFUSED = {
    "spec.gcsFaultToleranceOptions.storage": lambda: gcs_ft.validation_errors(
        {"gcsFaultToleranceOptions": {"redisAddress": "redis:6379", "storage": {"claimName": "gcs"}}},
        {},
        "spec",
    ),
}


def refused(path: str) -> bool:
    for field, errors in REFUSED.items():
        if path == field or path.startswith(field + "."):
            return any(message.startswith(field) for message in errors())
    return False


def kuberay_fields() -> list[tuple[str, str]]:
    lines = [line.split() for line in FIELDS.read_text().splitlines() if line and not line.startswith("#")]
    return [(kind, path) for kind, path in lines]


@cache
def crd_schema(kind: str) -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "crds" / CRDS[kind]).read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    return dict(version["schema"]["openAPIV3Schema"])


def declared(kind: str, path: str) -> bool:
    node = crd_schema(kind)
    for name in path.split("."):
        while node.get("type") == "array":
            node = node["items"]
        properties = node.get("properties") or {}
        if name not in properties:
            return False
        node = properties[name]
    return True


def as_cluster_path(kind: str, path: str) -> str | None:
    """The path inside a RayCluster spec, written as on a RayCluster (`spec.…`), or None."""
    at = CLUSTER_SPEC_AT[kind]
    if path == at or path.startswith(at + "."):
        return "spec" + path.removeprefix(at)
    return None


def warned(kind: str, path: str) -> bool:
    candidates = {path, as_cluster_path(kind, path)} - {None}
    return any(
        c == ignored or str(c).startswith(ignored + ".")
        for c in candidates
        for ignored in IGNORED_FIELD_PATHS
    )


@cache
def operator_source() -> str:
    return "\n".join(p.read_text() for d in OPERATOR_CODE for p in sorted((ROOT / d).rglob("*.py")))


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def named_by_the_operator(path: str) -> bool:
    leaf = path.rsplit(".", 1)[-1]
    source = operator_source()
    return f'"{leaf}"' in source or re.search(rf"\.{snake(leaf)}\b", source) is not None


def test_the_checked_in_list_is_kuberay_v1_7_0s() -> None:
    fields = kuberay_fields()
    assert len(fields) > 250
    assert ("RayCluster", "spec.authOptions.mode") in fields
    assert ("RayJob", "spec.deletionStrategy.deletionRules.condition.ttlSeconds") in fields
    assert ("RayService", "spec.upgradeStrategy.clusterUpgradeOptions.gatewayClassName") in fields
    for cron_field in ("jobTemplate", "jobTemplate.entrypoint", "schedule", "timeZone", "suspend"):
        assert ("RayCronJob", f"spec.{cron_field}") in fields
    assert ("RayCronJob", "spec.jobTemplate.rayClusterSpec.gcsFaultToleranceOptions.redisAddress") in fields


def as_rayjob_path(kind: str, path: str) -> str | None:
    """A RayCronJob's template field as the RayJob field it becomes (`spec.…`), or None."""
    if kind == "RayCronJob" and path.startswith(JOB_TEMPLATE + "."):
        return "spec" + path.removeprefix(JOB_TEMPLATE)
    return None


def implemented_or_warned(kind: str, path: str) -> bool:
    rayjob_path = as_rayjob_path(kind, path)
    if rayjob_path is not None:
        return implemented_or_warned("RayJob", rayjob_path)
    cluster_path = as_cluster_path(kind, path)
    return (
        warned(kind, path)
        or named_by_the_operator(path)
        or (cluster_path or path) in READ_BY_THE_RAY_AUTOSCALER
        or refused(cluster_path or path)
    )


@pytest.mark.parametrize(("kind", "path"), kuberay_fields(), ids=lambda value: str(value))
def test_every_kuberay_field_is_kept_and_implemented_or_warned(kind: str, path: str) -> None:
    assert declared(kind, path), f"{kind} {path}: not in our CRD, the API server would drop it silently"
    assert implemented_or_warned(kind, path), (
        f"{kind} {path}: neither read by the operator nor warned as unimplemented"
    )


def test_a_template_field_counts_as_the_rayjob_field_it_becomes() -> None:
    assert as_rayjob_path("RayCronJob", "spec.jobTemplate.entrypoint") == "spec.entrypoint"
    assert as_rayjob_path("RayCronJob", "spec.jobTemplate") is None
    assert as_rayjob_path("RayCronJob", "spec.schedule") is None
    assert warned("RayCronJob", "spec.jobTemplate.rayClusterSpec.networkPolicy")
    assert not implemented_or_warned("RayCronJob", "spec.jobTemplate.noSuchField")


def test_every_warned_field_is_a_kuberay_field_and_in_the_compatibility_doc() -> None:
    fields = {path for _, path in kuberay_fields()}
    doc = (ROOT / "docs" / "kuberay-compatibility.md").read_text()
    for path in IGNORED_FIELD_PATHS:
        assert path in fields, path
        assert path.removeprefix("spec.") in doc, f"{path} is warned but not in docs/kuberay-compatibility.md"
