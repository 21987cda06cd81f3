"""DRA devices as quota (issue #30): Kueue v0.19.2's pkg/dra counting, mapped device classes,
and the pod sets of every queued kind charged for their ResourceClaimTemplates."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import ADAPTERS, records
from rayquota.operator.queue.adapters.raycluster import raycluster_demand
from rayquota.operator.queue.adapters.rayjob import rayjob_demand
from rayquota.operator.queue.adapters.rayservice import rayservice_demand
from rayquota.operator.queue.demand import podsets
from rayquota.operator.queue.dra.cache import ClaimCache
from rayquota.operator.queue.dra.claims import ClaimError, devices_per_class, template_charges
from rayquota.operator.queue.dra.context import ClaimReading
from rayquota.operator.queue.dra.settings import DraSettings, parse_mappings
from rayquota.operator.queue.workloads.template_quantities import quantity_errors
from tests.unit.queue import bodies

GPU_CLASS = "gpu.example.com"
MIG_CLASS = "mig-1g.example.com"
SETTINGS = DraSettings(
    parse_mappings('[{"name": "example.com/gpu", "deviceClassNames": ["gpu.example.com"]}]')
)


def claim_template(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"spec": {"devices": {"requests": list(requests)}}},
    }


def exactly(device_class: str = GPU_CLASS, count: int | None = 2, **more: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": device_class, "allocationMode": "ExactCount", **more}
    if count is not None:
        body["count"] = count
    return {"name": "gpus", "exactly": body}


TEMPLATES = {
    "two-gpus": claim_template("two-gpus", exactly(count=2)),
    "one-gpu": claim_template("one-gpu", exactly(count=None)),
    "mig": claim_template("mig", exactly(MIG_CLASS, 1)),
}


def lookup(name: str) -> dict[str, Any] | None:
    return TEMPLATES.get(name)


# The claim source the tests pass: these templates in every namespace.
CLAIMS = ClaimReading(SETTINGS, lookup)


def dra_worker_group(name: str = "gpu", replicas: int = 2, template: str = "two-gpus") -> dict[str, Any]:
    group = bodies.gpu_worker_group(name, replicas)
    spec = group["template"]["spec"]
    del spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
    spec["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": template}]
    return group


# --- counting one claim spec (Kueue's countDevicesPerClass) ----------------------------------


def test_exact_count_requests_are_summed_per_device_class_and_count_defaults_to_one() -> None:
    spec = {"devices": {"requests": [exactly(count=2), exactly(count=None), exactly(MIG_CLASS, 3)]}}
    assert devices_per_class(spec, "t") == {GPU_CLASS: 3, MIG_CLASS: 3}
    # allocationMode left out is ExactCount (the API server's default).
    assert devices_per_class(
        {"devices": {"requests": [{"exactly": {"deviceClassName": GPU_CLASS}}]}}, "t"
    ) == {GPU_CLASS: 1}


@pytest.mark.parametrize(
    ("request_body", "words"),
    [
        (
            {"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": GPU_CLASS}]},
            "t.devices.requests[0].firstAvailable",
        ),
        ({"name": "r"}, "t.devices.requests[0].exactly: Required value"),
        (exactly(count=None, allocationMode="All"), "t.devices.requests[0].exactly.allocationMode: 'All'"),
        (exactly(adminAccess=True), "t.devices.requests[0].exactly.adminAccess: true"),
        (exactly(allocationMode="Some"), "unsupported allocation mode 'Some'"),
        (exactly(count=0), "t.devices.requests[0].exactly.count: 0"),
    ],
)
def test_shapes_kueue_refuses_are_refused_naming_the_field(request_body: dict[str, Any], words: str) -> None:
    with pytest.raises(ClaimError, match=words.replace("[", r"\[").replace("]", r"\]")):
        devices_per_class({"devices": {"requests": [request_body]}}, "t")


# --- mappings -------------------------------------------------------------------------------


def test_the_first_mapping_of_a_device_class_wins() -> None:
    settings = DraSettings(
        parse_mappings(
            '[{"name": "a.com/gpu", "deviceClassNames": ["x", "y"]},'
            ' {"name": "b.com/gpu", "deviceClassNames": ["y"]}]'
        )
    )
    assert settings.lookup("x") == "a.com/gpu" and settings.lookup("y") == "a.com/gpu"
    assert settings.lookup("z") is None


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("{", "not JSON"),
        ('{"name": "a"}', "expected a list"),
        (
            '[{"name": "no spaces", "deviceClassNames": ["x"]}]',
            r"resources.deviceClassMappings\[0\].name: 'no spaces'",
        ),
        ('[{"name": "a.com/g", "deviceClassNames": []}]', r"\[0\].deviceClassNames: \[\]"),
        ('[{"name": "a.com/g", "deviceClassNames": ["Bad_Class"]}]', r"deviceClassNames\[0\]: 'Bad_Class'"),
        (
            '[{"name": "a", "deviceClassNames": ["x"]}, {"name": "a", "deviceClassNames": ["y"]}]',
            "mapped twice",
        ),
    ],
)
def test_bad_mappings_are_refused_naming_the_entry(raw: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_mappings(raw)


def test_settings_are_read_with_the_queue_settings() -> None:
    env = {
        "RAYQUOTA_DEVICE_CLASS_MAPPINGS": '[{"name": "example.com/gpu",'
        ' "deviceClassNames": ["gpu.example.com"]}]',
        "RAYQUOTA_DRA_REJECT_WHEN_DISABLED": "false",
    }
    from rayquota.config import build, load

    settings = build.operator_config(load(env=env).configuration).queue.labels.dra
    assert settings.lookup(GPU_CLASS) == "example.com/gpu"
    assert settings.integration and not settings.reject_when_disabled
    with pytest.raises(ValueError, match="RAYQUOTA_DRA_INTEGRATION='maybe'"):
        build.operator_config(load(env={"RAYQUOTA_DRA_INTEGRATION": "maybe"}).configuration)


# --- one pod template's charges -------------------------------------------------------------


def pod_spec(*claims: dict[str, Any]) -> dict[str, Any]:
    return {"containers": [{"name": "c"}], "resourceClaims": list(claims)}


def test_templates_are_charged_per_pod_as_their_mapped_resource_and_named_claims_are_not() -> None:
    spec = pod_spec(
        {"name": "a", "resourceClaimTemplateName": "two-gpus"},
        {"name": "b", "resourceClaimTemplateName": "one-gpu"},
        {"name": "shared", "resourceClaimName": "one-shared-claim"},
    )
    charged = template_charges(spec, "w", SETTINGS, lookup)
    assert charged.requests == {"example.com/gpu": 3000} and not charged.errors and not charged.missing


def test_an_unmapped_device_class_is_refused_with_its_name() -> None:
    charged = template_charges(
        pod_spec({"name": "m", "resourceClaimTemplateName": "mig"}), "w", SETTINGS, lookup
    )
    [error] = charged.errors
    assert error.startswith("w.spec.resourceClaims[0].resourceClaimTemplateName: ResourceClaimTemplate mig")
    assert f"DeviceClass {MIG_CLASS!r}" in error and "resources.deviceClassMappings" in error


def test_a_missing_template_is_reported_and_a_bad_one_names_its_field() -> None:
    TEMPLATES["all"] = claim_template("all", exactly(count=None, allocationMode="All"))
    try:
        spec = pod_spec(
            {"name": "x", "resourceClaimTemplateName": "nope"},
            {"name": "y", "resourceClaimTemplateName": "all"},
        )
        charged = template_charges(spec, "w", SETTINGS, lookup)
    finally:
        del TEMPLATES["all"]
    assert charged.missing == ("nope",)
    [error] = charged.errors
    assert (
        "w.spec.resourceClaims[1]: ResourceClaimTemplate all: "
        "spec.spec.devices.requests[0].exactly.allocationMode" in error
    )


def test_with_the_integration_off_claims_are_refused_or_charged_nothing() -> None:
    spec = pod_spec({"name": "a", "resourceClaimTemplateName": "two-gpus"})
    off = template_charges(spec, "w", DraSettings(SETTINGS.mappings, integration=False), lookup)
    assert off.errors and "DRA integration is off" in off.errors[0]
    ignored = template_charges(
        spec, "w", DraSettings(SETTINGS.mappings, integration=False, reject_when_disabled=False), lookup
    )
    assert ignored.requests == {} and not ignored.errors


def test_without_any_mapping_a_claim_template_is_refused() -> None:
    charged = template_charges(
        pod_spec({"name": "a", "resourceClaimTemplateName": "two-gpus"}), "w", DraSettings(), lookup
    )
    assert charged.errors and "no resources.deviceClassMappings are configured" in charged.errors[0]


# --- pod sets of every kind -----------------------------------------------------------------


def test_a_raycluster_worker_group_is_charged_like_nvidia_gpu_limits() -> None:
    cluster = bodies.raycluster()
    cluster["spec"] = bodies.cluster_spec(dra_worker_group("gpu", replicas=2))
    demand = raycluster_demand(cluster, CLAIMS)
    worker = next(ps for ps in demand.pod_sets if ps.name == "gpu")
    assert worker.requests["example.com/gpu"] == 2000 and worker.count == 2
    assert podsets.resource_totals(demand.pod_sets)["example.com/gpu"] == 4000
    # Without a reading the claims charge nothing: the reading passed is what counts.
    assert "example.com/gpu" not in podsets.resource_totals(raycluster_demand(cluster).pod_sets)


def test_a_dra_head_and_a_rayjob_submitter_are_charged_too() -> None:
    job = bodies.rayjob()
    spec = job["spec"]["rayClusterSpec"]
    spec["workerGroupSpecs"] = [dra_worker_group("gpu", 1, "one-gpu")]
    spec["headGroupSpec"]["template"]["spec"]["resourceClaims"] = [
        {"name": "g", "resourceClaimTemplateName": "one-gpu"}
    ]
    job["spec"]["submitterPodTemplate"] = {
        "spec": {
            "containers": [{"name": "s", "resources": {"requests": {"cpu": "1"}}}],
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "two-gpus"}],
        }
    }
    sets = {ps.name: ps for ps in rayjob_demand(job, claims=CLAIMS).pod_sets}
    assert {name: ps.requests.get("example.com/gpu") for name, ps in sets.items()} == {
        "head": 1000,
        "gpu": 1000,
        "submitter": 2000,
    }


def test_a_rayservice_upgrade_is_charged_active_plus_pending() -> None:
    service = bodies.rayservice()
    old = bodies.child_cluster(service, "svc-old", bodies.cluster_spec(dra_worker_group("gpu", 2, "one-gpu")))
    new = bodies.child_cluster(
        service, "svc-new", bodies.cluster_spec(dra_worker_group("gpu", 3, "two-gpus"))
    )
    demand = rayservice_demand(service, [old, new], CLAIMS)
    assert podsets.resource_totals(demand.pod_sets)["example.com/gpu"] == 2 * 1000 + 3 * 2000


def test_a_batch_job_is_charged_per_pod() -> None:
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": "u",
            "labels": {naming.KUEUE_QUEUE_LABEL: "q"},
        },
        "spec": {
            "parallelism": 3,
            "suspend": True,
            "template": {
                "spec": {
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                    "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "two-gpus"}],
                }
            },
        },
    }
    [main] = records(claims=CLAIMS)["Job"].pod_sets(body, []).pod_sets
    assert main.count == 3 and main.totals()["example.com/gpu"] == 6000


def test_quantity_errors_name_the_template_field_and_the_device_class() -> None:
    cluster = bodies.raycluster()
    cluster["spec"] = bodies.cluster_spec(
        dra_worker_group("gpu", 1, "mig"), dra_worker_group("b", 1, "later")
    )
    errors = quantity_errors("RayCluster", cluster, CLAIMS)
    created_before_its_templates = quantity_errors(
        "RayCluster", cluster, CLAIMS, missing_claim_templates=False
    )
    assert len(errors) == 2
    assert errors[0].startswith(
        "spec.workerGroupSpecs[0].template.spec.resourceClaims[0].resourceClaimTemplateName"
    )
    assert MIG_CLASS in errors[0]
    assert "ResourceClaimTemplate 'later' not found" in errors[1]
    assert created_before_its_templates == errors[:1]
    assert quantity_errors("RayCluster", copy.deepcopy(cluster), None) == []  # no source: nothing read


def test_a_workload_written_without_requests_but_with_claims_is_refused_not_admitted_free() -> None:
    from rayquota.operator.queue.admission import converter

    body = {
        "metadata": {"name": "w", "namespace": "team-a", "uid": "u"},
        "spec": {
            "queueName": "q",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c"}],
                            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "two-gpus"}],
                        }
                    },
                }
            ],
        },
    }
    with pytest.raises(converter.ConversionError, match=r"spec.podSets\[0\]: template.spec.resourceClaims"):
        converter.workload(body)


def test_a_rayjob_demand_read_before_its_template_is_cached_is_not_memoised() -> None:
    """Found on the local control plane: a RayJob's demand read once without its claims counted
    was kept by the memo, and the Workload was written without the devices. A demand that
    reads claim templates is read again: a template cached after the first read counts."""
    from tests.unit.queue.fakes import FakeInformer

    job = bodies.rayjob()
    job["metadata"]["generation"] = 1
    job["spec"]["rayClusterSpec"]["workerGroupSpecs"] = [dra_worker_group("gpu", 2, "two-gpus")]
    templates = FakeInformer()
    adapter = records(claims=ClaimCache(SETTINGS, templates))["RayJob"]  # type: ignore[arg-type]
    assert "example.com/gpu" not in podsets.resource_totals(adapter.pod_sets(job, []).pod_sets)
    templates.store.objs.append(TEMPLATES["two-gpus"])
    totals = podsets.resource_totals(adapter.pod_sets(job, []).pod_sets)
    assert totals["example.com/gpu"] == 4000


def test_the_webhook_refuses_an_unmapped_device_class_at_creation_and_waits_for_missing_templates() -> None:
    from rayquota.operator.queue.objects import QueueObjects
    from rayquota.operator.webhooks import review
    from tests.unit.queue.fakes import FakeInformer, fake_pod_informers

    templates = FakeInformer([TEMPLATES["mig"], TEMPLATES["two-gpus"]])
    settings = naming.QueueSettings(dra=SETTINGS)
    kinds = {k: FakeInformer() for k in ADAPTERS}
    claims = ClaimCache(SETTINGS, templates)  # type: ignore[arg-type]
    objects = QueueObjects(settings, kinds, FakeInformer(), fake_pod_informers(), claims=claims)  # type: ignore[arg-type]
    cluster = bodies.raycluster(**{naming.KUEUE_QUEUE_LABEL: "team"})
    cluster["spec"] = bodies.cluster_spec(dra_worker_group("gpu", 1, "mig"))
    verdict = review.mutate("RayCluster", cluster, objects)
    assert not verdict.allowed and f"DeviceClass {MIG_CLASS!r}" in (verdict.message or "")
    assert "spec.workerGroupSpecs[0].template.spec.resourceClaims[0]" in (verdict.message or "")
    for template in ("two-gpus", "not-created-yet"):
        cluster["spec"] = bodies.cluster_spec(dra_worker_group("gpu", 1, template))
        assert review.mutate("RayCluster", cluster, objects).allowed
