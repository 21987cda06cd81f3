"""Every spec field of KubeRay v1.7.0's RayCluster, RayJob, RayService and RayCronJob is implemented
or warned.

The list of fields is checked in (tests/unit/api/kuberay_v1_7_0_spec_fields.txt, made by
tools/kuberay_spec_fields.py from KubeRay's Go types at v1.7.0). For each field:
- our CRD declares it, so the API server keeps it (a pruned field is lost silently);
- it is either warned on the object (rayquota.api.ray_unimplemented, listed in
  docs/kuberay-compatibility.md), or the operator reads it at its full path: one module of the
  operator's code outside the models names every step of the path (a field no reconciler, builder
  or validation names at that place cannot be acted on; a leaf name alone is not enough, since
  `autoscalerOptions.idleTimeoutSeconds` and `workerGroupSpecs[].idleTimeoutSeconds` share one),
  or it is refused with an error naming it (checked here by running the validation).
A RayCronJob's `spec.jobTemplate.X` is its RayJobs' `spec.X`: the template is copied into each
RayJob unchanged (the plan's tests check the copy), so it is held to the RayJob's field.
"""

from __future__ import annotations

import re
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.api.ray_unimplemented import IGNORED_FIELD_PATHS
from rayquota.operator.ray.builders import gcs_ft
from rayquota.operator.ray.raycluster import security_fields

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
READ_BY_THE_RAY_AUTOSCALER = {
    "spec.workerGroupSpecs.priority",
    "spec.autoscalerOptions.upscalingMode",
    # The cluster-wide idle timeout: Ray's autoscaler reads it from the RayCluster (KubeRay's
    # operator only checks it is not negative). The leaf-only walk counted it as read because a
    # worker group's field has the same name.
    "spec.autoscalerOptions.idleTimeoutSeconds",
}


# Fields refused when set, with the error the validation gives (path in a RayCluster spec).
REFUSED = {
    "spec.gcsFaultToleranceOptions.storage": lambda: gcs_ft.validation_errors(
        {"gcsFaultToleranceOptions": {"redisAddress": "redis:6379", "storage": {"claimName": "gcs"}}},
        {},
        "spec",
    ),
    # Fields asking for security rayquota does not provide (security_fields).
    **{
        f"spec.{name}": (lambda name=name: security_fields.refusals({name: {}}, "spec"))
        for name in security_fields.GATED_FIELDS
    },
    # Implemented on a RayCluster (auth_token); refused where KubeRay refuses it.
    "spec.rayClusterSpec.authOptions.enableK8sTokenAuth": lambda: security_fields.refusals(
        {"authOptions": {"mode": "token", "enableK8sTokenAuth": True}}, "spec.rayClusterSpec", "RayJob"
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


_INCREMENTAL = "rayquota/operator/ray/rayservice/incremental.py"  # the parsed clusterUpgradeOptions
# Modules that are handed one object of a path whole by their callers (a worker group, the
# autoscaler options, the parsed upgrade options) and read its fields without naming it.
HANDED_OVER = {
    # ray_start_params(node_type, group, ...): the head group or a worker group.
    "headGroupSpec": ("rayquota/operator/ray/builders/ray_start.py",),
    # ray_start_params, build_worker_pod, and the planner's group_bounds / desired_pods.
    "workerGroupSpecs": (
        "rayquota/operator/ray/builders/ray_start.py",
        "rayquota/operator/ray/builders/podspec.py",
        "rayquota/operator/ray/raycluster/plan.py",
    ),
    # _credential_env(name, credential): a Redis credential (value or valueFrom).
    "redisUsername": ("rayquota/operator/ray/builders/gcs_ft.py",),
    "redisPassword": ("rayquota/operator/ray/builders/gcs_ft.py",),
    "autoscalerOptions": ("rayquota/operator/ray/builders/autoscaler_sidecar.py",),
    "upgradeStrategy": ("rayquota/operator/ray/rayservice/reconciler.py", _INCREMENTAL),
    "clusterUpgradeOptions": ("rayquota/operator/ray/rayservice/reconciler.py", _INCREMENTAL),
}


@cache
def operator_modules() -> tuple[tuple[str, str], ...]:
    """(path from the repository root, source) of every module of the operator's code."""
    return tuple(
        (str(p.relative_to(ROOT)), p.read_text())
        for d in OPERATOR_CODE
        for p in sorted((ROOT / d).rglob("*.py"))
    )


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def names(source: str, field: str) -> bool:
    """The module reads ``field``: as a key (in quotes) or a model attribute (snake case)."""
    return f'"{field}"' in source or re.search(rf"\.{snake(field)}\b", source) is not None


def _token(field: str) -> str:
    """``field`` as code reads it: a quoted key or a model attribute."""
    return rf"(?:[\"']{field}[\"']|\.{snake(field)}\b)"


def reads_under(module: str, source: str, parent: str, child: str) -> bool:
    """The module reads ``child`` inside ``parent``: both on one line (``.get("a") or {}).get("b")``),
    through a variable holding ``parent`` (``options = spec.get("a") ...; options.get("b")``), or
    anywhere when the module is handed ``parent`` whole by its callers (HANDED_OVER)."""
    if module in HANDED_OVER.get(parent, ()):
        return names(source, child)
    if re.search(_token(parent) + r".*" + _token(child), source):
        return True
    child_of = rf"(?:\.get\(\s*[\"']{child}[\"']|\[\s*[\"']{child}[\"']\s*\]|\.{snake(child)}\b)"
    return any(re.search(rf"\b{holder}{child_of}", source) for holder in _holders(source, parent))


def _holders(source: str, parent: str) -> set[str]:
    """Names that hold ``parent`` or one of its items: assigned from it, or looping over it (or
    over such a name)."""
    holders = set(re.findall(rf"^\s*(\w+)\s*(?::[^=\n]*)?=[^=\n].*{_token(parent)}", source, re.MULTILINE))
    while True:
        sources = [_token(parent), *(rf"\b{name}\b" for name in holders)]
        looped = {
            name.strip()
            for found in re.findall(rf"\bfor\s+([\w, ]+?)\s+in\s+[^\n]*(?:{'|'.join(sources)})", source)
            for name in found.split(",")
        }
        if looped <= holders:
            return holders
        holders |= looped


def named_by_the_operator(kind: str, path: str) -> bool:
    """The operator reads the field at its full path: the first step below ``spec`` is named by
    some module, and each further step is read inside the one before it (reads_under). A RayCluster
    spec's fields are walked at their path in a RayCluster: the cluster code reads them there for
    every kind."""
    cluster_path = as_cluster_path(kind, path)
    walked = path if cluster_path in (None, "spec") else cluster_path  # the cluster spec itself: as named
    steps = tuple(walked.split(".")[1:])
    return named_anywhere(steps[0]) and all(
        read_under_somewhere(parent, child) for parent, child in pairwise(steps)
    )


@cache
def named_anywhere(field: str) -> bool:
    return any(names(source, field) for _, source in operator_modules())


@cache
def read_under_somewhere(parent: str, child: str) -> bool:
    return any(reads_under(module, source, parent, child) for module, source in operator_modules())


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
        or named_by_the_operator(kind, path)
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
    assert warned("RayCronJob", "spec.jobTemplate.rayClusterSpec.headGroupSpec.ingressOptions")
    assert implemented_or_warned("RayCronJob", "spec.jobTemplate.rayClusterSpec.networkPolicy.head")
    assert not warned("RayCronJob", "spec.jobTemplate.rayClusterSpec.networkPolicy")  # refused instead
    assert not implemented_or_warned("RayCronJob", "spec.jobTemplate.noSuchField")


def test_a_field_counts_as_read_at_its_full_path_only() -> None:
    # Each leaf is read somewhere, but not under that parent: a leaf name alone is not enough.
    assert named_by_the_operator("RayCluster", "spec.workerGroupSpecs.idleTimeoutSeconds")
    assert not named_by_the_operator("RayCluster", "spec.gcsFaultToleranceOptions.idleTimeoutSeconds")
    assert not named_by_the_operator("RayCluster", "spec.authOptions.replicas")
    assert not implemented_or_warned("RayJob", "spec.rayClusterSpec.authOptions.replicas")


def test_every_warned_field_is_a_kuberay_field_and_in_the_compatibility_doc() -> None:
    fields = {path for _, path in kuberay_fields()}
    doc = (ROOT / "docs" / "kuberay-compatibility.md").read_text()
    for path in IGNORED_FIELD_PATHS:
        assert path in fields, path
        assert path.removeprefix("spec.") in doc, f"{path} is warned but not in docs/kuberay-compatibility.md"
