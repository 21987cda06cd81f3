"""Extended resources backed by a DeviceClass (Kubernetes' DRAExtendedResource), counted as Kueue
v0.19.2 counts them: the facts of its ``pkg/dra`` extended-resource cases (TestIsExtendedResourceName,
TestSelectedDeviceClass, TestResolveExtendedResourceQuota), through the operator's demand read."""

from __future__ import annotations

from typing import Any

import pytest

from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import ADAPTERS, records, registry
from rayquota.operator.queue.demand import podsets
from rayquota.operator.queue.dra import context as dra
from rayquota.operator.queue.dra.cache import ClaimCache
from rayquota.operator.queue.dra.extended import (
    backed_requests,
    is_extended_resource_name,
    selected_device_class,
)
from rayquota.operator.queue.dra.settings import DraSettings, parse_mappings
from rayquota.operator.queue.objects import QueueObjects
from rayquota.operator.queue.workloads.template_quantities import quantity_errors
from rayquota.operator.ray.builders.pod_resources import pod_requests
from tests.unit.queue import bodies
from tests.unit.queue.fakes import FakeInformer, fake_pod_informers


def device_class(name: str, extended: str | None, created: int = 0) -> dict[str, Any]:
    spec = {} if extended is None else {"extendedResourceName": extended}
    stamp = f"2026-01-01T00:{created // 60:02d}:{created % 60:02d}Z"
    return {"metadata": {"name": name, "creationTimestamp": stamp}, "spec": spec}


GPU = device_class("gpu.nvidia.com", "example.com/gpu")
MIG = device_class("mig.nvidia.com", "nvidia.com/mig-1g.10gb")
PLAIN = device_class("plain.nvidia.com", None)
ALPHA = device_class("alpha.example.com", "example.com/gpu", created=10)
OMEGA = device_class("omega.example.com", "example.com/gpu", created=20)
CLASS_A = device_class("class-a", "vendor.example/a")
CLASS_B = device_class("class-b", "vendor.example/b")
GPU_NAME = "example.com/gpu"
GPU_MAPPED = '[{"name": "gpu-claims", "deviceClassNames": ["gpu.nvidia.com"]}]'
GPU_CLAIMS = '[{"name": "gpu-claims", "deviceClassNames": ["class-a", "class-b"]}]'


def container(name: str, **requests: str) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": dict(requests)}}


def charged(
    spec: dict[str, Any], classes: list[dict[str, Any]], mappings: str = ""
) -> tuple[dict[str, int], tuple[str, ...]]:
    settings = DraSettings(parse_mappings(mappings))

    def naming_(resource: str) -> list[dict[str, Any]]:
        return [c for c in classes if c["spec"].get("extendedResourceName") == resource]

    out = backed_requests(spec, pod_requests(spec), "spec.template", settings, naming_)
    return dict(out.requests), out.errors


@pytest.mark.parametrize(
    ("name", "extended"),
    [
        ("cpu", False),
        ("memory", False),
        ("ephemeral-storage", False),
        ("nvidia.com/gpu", True),
        ("example.com/gpu", True),
        ("unqualified", False),
        ("hugepages-1Gi", False),
        ("kubernetes.io/anything", False),
        ("requests.example.com/gpu", False),
    ],
)
def test_which_names_are_extended_resources(name: str, extended: bool) -> None:
    assert is_extended_resource_name(name) is extended


@pytest.mark.parametrize(
    ("classes", "want"),
    [
        ([("a", 100)], "a"),
        ([("a", 100), ("b", 200)], "b"),  # the class created later wins
        ([("b", 200), ("a", 100)], "b"),  # from either end of the list
        ([("b", 100), ("a", 100)], "a"),  # created together: the first name
        ([("a", 100), ("b", 100)], "a"),
        ([("a", 100), ("z", 200)], "z"),  # a later class beats a smaller name
        ([("a", 300), ("z", 100), ("b", 300)], "a"),  # the tie-break among the latest only
    ],
)
def test_the_class_the_scheduler_allocates_from(classes: list[tuple[str, int]], want: str) -> None:
    bodies_ = [device_class(name, "example.com/gpu", created) for name, created in classes]
    assert selected_device_class(bodies_)["metadata"]["name"] == want


def test_an_extended_resource_backed_by_a_class_is_charged_as_its_own_name_when_unmapped() -> None:
    spec = {"containers": [container("c", **{"example.com/gpu": "2", "cpu": "1"})]}
    requests, errors = charged(spec, [GPU])
    assert requests == {"example.com/gpu": 2000, "cpu": 1000} and errors == ()


def test_several_extended_resources_and_a_class_without_one() -> None:
    spec = {"containers": [container("c", **{"example.com/gpu": "1", "nvidia.com/mig-1g.10gb": "2"})]}
    assert charged(spec, [GPU, MIG, PLAIN]) == ({"example.com/gpu": 1000, "nvidia.com/mig-1g.10gb": 2000}, ())


def test_no_backing_class_leaves_the_request_as_it_is_even_fractional() -> None:
    spec = {"containers": [container("c", **{"example.com/gpu": "500m"})]}
    assert charged(spec, [PLAIN]) == ({"example.com/gpu": 500}, ())


def test_init_containers_at_their_peak_and_containers_summed() -> None:
    spec = {
        "initContainers": [container("i1", **{GPU_NAME: "5"}), container("i2", **{GPU_NAME: "3"})],
        "containers": [container("c1", **{GPU_NAME: "1"}), container("c2", **{GPU_NAME: "2"})],
    }
    assert charged(spec, [GPU], GPU_MAPPED) == (
        {"gpu-claims": 5000},
        (),
    )


def test_two_names_sharing_a_quota_key_are_each_aggregated_first() -> None:
    """A in an init container, B in a container, both mapped to one key: 5 + 5, not max(5, 5)."""
    spec = {
        "initContainers": [container("i", **{"vendor.example/a": "5"})],
        "containers": [container("c", **{"vendor.example/b": "5"})],
    }
    assert charged(spec, [CLASS_A, CLASS_B], GPU_CLAIMS) == ({"gpu-claims": 10000}, ())


def test_a_fractional_amount_of_a_backed_resource_is_refused_naming_the_container() -> None:
    spec = {"containers": [container("c", **{"example.com/gpu": "500m"})]}
    _, errors = charged(spec, [GPU])
    assert errors
    assert "spec.template.spec.containers[0].resources.requests.example.com/gpu: '500m'" in errors[0]
    assert "gpu.nvidia.com" in errors[0]


def test_the_mapping_of_the_later_class_decides_the_quota_key() -> None:
    spec = {"containers": [container("c", **{"example.com/gpu": "1"})]}
    mappings = (
        '[{"name": "alpha-claims", "deviceClassNames": ["alpha.example.com"]},'
        ' {"name": "omega-claims", "deviceClassNames": ["omega.example.com"]}]'
    )
    assert charged(spec, [ALPHA, OMEGA], mappings) == ({"omega-claims": 1000}, ())
    only_alpha = '[{"name": "alpha-claims", "deviceClassNames": ["alpha.example.com"]}]'
    assert charged(spec, [ALPHA, OMEGA], only_alpha) == ({"example.com/gpu": 1000}, ())


def test_with_the_integration_off_nothing_is_mapped() -> None:
    spec = {"containers": [container("c", **{"example.com/gpu": "1"})]}
    settings = DraSettings(parse_mappings(GPU_MAPPED), integration=False)
    out = backed_requests(spec, pod_requests(spec), "t", settings, lambda name: [GPU])
    assert dict(out.requests) == {"example.com/gpu": 1000}


# --- through the operator: a worker group asking for example.com/gpu in its limits ----------------


def claims_with_classes(*classes: dict[str, Any]) -> ClaimCache:
    settings = DraSettings(parse_mappings(GPU_MAPPED))
    return ClaimCache(settings, FakeInformer(), FakeInformer(list(classes)))  # type: ignore[arg-type]


def objects_with_classes(*classes: dict[str, Any]) -> QueueObjects:
    claims = claims_with_classes(*classes)
    kinds = {k: FakeInformer() for k in ADAPTERS}
    return QueueObjects(
        naming.QueueSettings(dra=claims.settings),
        kinds,  # type: ignore[arg-type]
        FakeInformer(),  # type: ignore[arg-type]
        fake_pod_informers(),
        adapters=registry(beside_kuberay=False, claims=claims),
        claims=claims,
    )


def extended_group(amount: str) -> dict[str, Any]:
    group = bodies.gpu_worker_group("gpu", 2)
    limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
    del limits["nvidia.com/gpu"]
    limits["example.com/gpu"] = amount
    return group


def test_a_worker_group_asking_for_a_backed_extended_resource_in_limits_is_charged_its_mapping() -> None:
    objects = objects_with_classes(GPU)
    cluster = bodies.raycluster(**{naming.KUEUE_QUEUE_LABEL: "team"})
    cluster["spec"] = bodies.cluster_spec(extended_group("2"))
    totals = podsets.resource_totals(objects.adapters["RayCluster"].pod_sets(cluster, []).pod_sets)
    assert totals["gpu-claims"] == 4000 and "example.com/gpu" not in totals
    # A live pod of that group counts the same in the caps' budget.
    pod_spec = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert dra.quota_requests_of(objects.claims)(pod_spec)["gpu-claims"] == 2000
    cluster["spec"] = bodies.cluster_spec(extended_group("1500m"))
    errors = quantity_errors("RayCluster", cluster, objects.claims)
    assert any("resources.limits.example.com/gpu: '1500m'" in e for e in errors), errors


def test_without_a_backing_class_the_extended_resource_counts_as_itself() -> None:
    objects = objects_with_classes(PLAIN)
    cluster = bodies.raycluster(**{naming.KUEUE_QUEUE_LABEL: "team"})
    cluster["spec"] = bodies.cluster_spec(extended_group("2"))
    totals = podsets.resource_totals(objects.adapters["RayCluster"].pod_sets(cluster, []).pod_sets)
    assert totals["example.com/gpu"] == 4000 and "gpu-claims" not in totals
    assert quantity_errors("RayCluster", cluster, objects.claims) == []


def test_a_rayjobs_demand_follows_a_device_class_created_after_it_was_read() -> None:
    """The RayJob's demand is memoised by its generation; one asking for an extended resource a
    DeviceClass backs is read again, so a class created later counts."""
    claims = claims_with_classes(PLAIN)
    job = bodies.rayjob(spec=bodies.cluster_spec(extended_group("2")))
    job["metadata"]["generation"] = 1
    adapter = records(claims=claims)["RayJob"]
    assert "example.com/gpu" in podsets.resource_totals(adapter.pod_sets(job, []).pod_sets)
    claims.device_classes.store.objs.append(GPU)  # type: ignore[union-attr]
    assert "gpu-claims" in podsets.resource_totals(adapter.pod_sets(job, []).pod_sets)
