"""DRA claims read wherever a demand is read (issue #30), the queue's reason naming the
DeviceClasses of a mapped resource, and the counting cases of Kueue v0.19.2's pkg/dra tests
(facts: which shapes count how much, which are refused)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from rayquota import cli_views
from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import ADAPTERS, registry
from rayquota.operator.queue.adapters.rayservice import rayservice_demand
from rayquota.operator.queue.adapters.record_helpers import allocation_of
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.demand import podsets
from rayquota.operator.queue.dra.cache import ClaimCache
from rayquota.operator.queue.dra.claims import ClaimError, devices_per_class, template_charges
from rayquota.operator.queue.dra.settings import DraSettings, parse_mappings
from rayquota.operator.queue.dra.words import naming_device_classes
from rayquota.operator.queue.gating.gate import QueueGate
from rayquota.operator.queue.objects import QueueObjects, workload_key
from rayquota.operator.queue.workloads.template_quantities import quantity_errors
from rayquota.queueing import PodSetAssignment
from tests.unit.queue import bodies
from tests.unit.queue.fakes import FakeInformer, fake_pod_informers
from tests.unit.queue.test_cli_views import state
from tests.unit.queue.test_dra import (
    GPU_CLASS,
    MIG_CLASS,
    SETTINGS,
    TEMPLATES,
    dra_worker_group,
    exactly,
    lookup,
)
from tests.unit.queue.test_gate import Informer

# --- the gate reads a RayService child's demand with the claim templates bound -----------------


def admitted_service_with_a_dra_child() -> tuple[QueueGate, dict[str, Any]]:
    """A queued RayService whose one child asks for devices through a claim template, admitted
    whole: the Workload's pod sets as the Workload's reconciler reads them (claims counted)."""
    service = bodies.rayservice()
    service["metadata"]["labels"] = {naming.KUEUE_QUEUE_LABEL: "team"}
    child = bodies.child_cluster(service, "svc-a", bodies.cluster_spec(dra_worker_group("gpu", 2, "one-gpu")))
    claims = ClaimCache(SETTINGS, FakeInformer(list(TEMPLATES.values())))  # type: ignore[arg-type]
    demand = rayservice_demand(service, [child], claims.claim_reading("team-a"))
    pod_sets = [PodSetAssignment(ps.name, ps.count, {}, {}) for ps in demand.pod_sets]
    workload = {
        "metadata": {"name": workload_key("RayService", service).name, "namespace": "team-a"},
        "status": {"admission": converter.admission_to_api("cq", pod_sets)},
    }
    informers = {"RayJob": Informer([]), "RayCluster": Informer([child]), "RayService": Informer([service])}
    objects = QueueObjects(
        naming.QueueSettings(dra=SETTINGS),
        informers,  # type: ignore[arg-type]
        FakeInformer([workload]),
        fake_pod_informers(),
        adapters=registry(beside_kuberay=False, claims=claims),
        claims=claims,
    )
    return QueueGate(objects), service


def test_an_admitted_dra_child_of_a_rayservice_may_run() -> None:
    """Found on the local control plane: the gate read the child's demand without its claims,
    so its pod sets (named after their shape, devices included) were not the admitted ones and
    the cluster stayed suspended: the upgrade test's service never became Ready."""
    gate, service = admitted_service_with_a_dra_child()
    verdict = gate.may_run("RayService", service, part="svc-a")
    assert verdict is not None and verdict.open, verdict


def test_the_gates_demand_read_counts_the_claims_of_its_records_source() -> None:
    """The records own the claim reading: the gate's ``allocation_of`` (a kind's ``pod_sets``)
    counts the DRA devices of the namespace's claim templates from the claim source the records
    were built with, and the quantity check reads the same source. Once a caller had to bind
    them, and one that forgot charged nothing."""
    gate, service = admitted_service_with_a_dra_child()
    queued = gate.objects.queued("RayService", service)
    assert queued is not None
    children = gate.objects.children("RayService", service)
    demand, allocation = allocation_of(queued.adapter, service, children, None)
    assert podsets.resource_totals(demand.pod_sets)["example.com/gpu"] == 2000
    assert set(allocation) == {"svc-a"}
    errors = quantity_errors("RayService", service, gate.objects.claims)
    assert errors == [], errors


def test_the_quantity_check_refuses_an_unmapped_class_read_from_the_source() -> None:
    """The quantity check reads the namespace's templates from the source it is given: an
    unmapped DeviceClass is named (the webhook and the queue's reason)."""
    gate, service = admitted_service_with_a_dra_child()
    child = gate.objects.children("RayService", service)[0]
    child["spec"] = bodies.cluster_spec(dra_worker_group("gpu", 2, "mig"))
    service["spec"]["rayClusterConfig"] = child["spec"]
    errors = quantity_errors("RayService", service, gate.objects.claims)
    assert any(f"DeviceClass {MIG_CLASS!r}" in e for e in errors), errors


def test_two_operators_in_one_process_each_count_their_own_claim_templates() -> None:
    """Each operator's records read the claim source they were built with. Once the process had
    one source, the last operator's cache: an earlier operator (a MultiKueue manager beside its
    worker, a suite worker that ran an operator before a unit test) counted another's templates."""
    job = bodies.rayjob()
    job["spec"]["rayClusterSpec"]["workerGroupSpecs"] = [dra_worker_group("gpu", 2, "two-gpus")]
    two, one = TEMPLATES["two-gpus"], {**TEMPLATES["one-gpu"], "metadata": TEMPLATES["two-gpus"]["metadata"]}
    first = ClaimCache(SETTINGS, FakeInformer([two]))  # type: ignore[arg-type]
    second = ClaimCache(SETTINGS, FakeInformer([one]))  # type: ignore[arg-type]
    first_records = registry(beside_kuberay=False, claims=first)
    second_records = registry(beside_kuberay=False, claims=second)

    def gpus(records: Any) -> int:
        return podsets.resource_totals(records["RayJob"].pod_sets(job, []).pod_sets).get("example.com/gpu", 0)

    assert (gpus(first_records), gpus(second_records), gpus(ADAPTERS)) == (4000, 2000, 0)


def test_the_dashboards_slices_count_the_claims_of_the_operators_source() -> None:
    """The Workload page beside the operator reads a slice's demand with records built with the
    operator's claim source: an admitted DRA child still suspended shows covered, with its
    devices, as the gate lets it run. Without the source its pod sets (named after their shape,
    devices included) are not the admitted ones: the slice would show uncovered, no devices."""
    from rayquota.dashboard.views.workload_page import RayContext, slices

    gate, service = admitted_service_with_a_dra_child()
    [workload] = gate.objects.workloads.store.list()
    [child] = gate.objects.children("RayService", service)
    child["spec"]["suspend"] = True
    ray = RayContext("RayService", service, [child])
    [counted] = slices(workload, ray, gate.objects.adapters)
    assert counted["covered"] and "example.com/gpu 2" in counted["needs"], counted
    assert sum(counted["allowedPods"].values()) == 3, counted
    [uncounted] = slices(workload, ray, ADAPTERS)
    assert not uncounted["covered"] and "example.com/gpu" not in uncounted["needs"], uncounted


# --- the reason names the DeviceClasses --------------------------------------------------------


def test_a_reason_names_the_device_classes_of_a_mapped_resource() -> None:
    settings = DraSettings(
        parse_mappings(
            '[{"name": "example.com/gpu", "deviceClassNames": ["gpu.example.com"]},'
            ' {"name": "example.com/mig", "deviceClassNames": ["mig-a.example.com", "mig-b.example.com"]}]'
        )
    )
    reason = (
        "couldn't assign flavors to worker group `gpu`: insufficient quota for example.com/gpu in "
        "flavor dra, 2 more needed; example.com/gpu-big and example.com/mig are short too"
    )
    said = naming_device_classes(reason, settings)
    assert "example.com/gpu (DRA DeviceClass gpu.example.com) in flavor dra" in said
    assert "example.com/gpu-big and" in said  # another resource that starts alike: untouched
    assert "example.com/mig (DRA DeviceClasses mig-a.example.com, mig-b.example.com) are" in said
    assert naming_device_classes(said, settings) == said  # said once
    assert naming_device_classes(reason, DraSettings()) == reason


# --- Kueue v0.19.2 pkg/dra claims_test.go, case by case (facts) -------------------------------


def one_pod(*claims: tuple[str, str], containers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "containers": containers or [{"name": "c"}],
        "resourceClaims": [
            {"name": name, "resourceClaimTemplateName": template} for name, template in claims
        ],
    }


TWO_CLASSES = DraSettings(
    parse_mappings(
        '[{"name": "res-1", "deviceClassNames": ["class-1"]},'
        ' {"name": "res-2", "deviceClassNames": ["class-2"]}]'
    )
)
KUEUE_TEMPLATES = {
    "tmpl-1": {"spec": {"spec": {"devices": {"requests": [exactly("class-1", 2)]}}}},
    "tmpl-2": {"spec": {"spec": {"devices": {"requests": [exactly("class-2", 1)]}}}},
}


def charged(spec: dict[str, Any]) -> dict[str, int]:
    charges = template_charges(spec, "w", TWO_CLASSES, KUEUE_TEMPLATES.get)
    assert not charges.errors and not charges.missing
    return dict(charges.requests)


def test_two_containers_with_different_templates_are_charged_both() -> None:
    containers = [
        {"name": "c1", "resources": {"claims": [{"name": "a"}]}},
        {"name": "c2", "resources": {"claims": [{"name": "b"}]}},
    ]
    assert charged(one_pod(("a", "tmpl-1"), ("b", "tmpl-2"), containers=containers)) == {
        "res-1": 2000,
        "res-2": 1000,
    }


@pytest.mark.parametrize("sharer", ["containers", "initContainers"])
def test_containers_sharing_one_claim_are_charged_it_once(sharer: str) -> None:
    """Kueue: 'Two containers sharing one claim template', 'Init and regular container
    sharing one template': the claim is the pod's, counted once."""
    spec = one_pod(("rc", "tmpl-1"), containers=[{"name": "c", "resources": {"claims": [{"name": "rc"}]}}])
    spec.setdefault(sharer, []).append({"name": "other", "resources": {"claims": [{"name": "rc"}]}})
    assert charged(spec) == {"res-1": 2000}


def test_constraints_config_and_selectors_pass_through_and_the_count_is_charged() -> None:
    request = exactly("class-1", 3, selectors=[{"cel": {"expression": "device.driver == 'x'"}}])
    claim = {
        "devices": {
            "requests": [request],
            "constraints": [{"requests": ["gpus"], "matchAttribute": "x/numa"}],
            "config": [{"requests": ["gpus"], "opaque": {"driver": "x", "parameters": {}}}],
        }
    }
    assert devices_per_class(claim, "t") == {"class-1": 3}


def test_a_request_without_a_device_class_is_not_charged() -> None:
    """Kueue skips a request whose deviceClassName is empty."""
    assert devices_per_class({"devices": {"requests": [exactly("", 2), exactly("class-1", 1)]}}, "t") == {
        "class-1": 1
    }


def test_counts_of_several_requests_add_up_without_bound() -> None:
    """Kueue saturates the sum at MaxInt64; Python's integers do not wrap, so the sum is exact."""
    big = 2**63 - 1
    assert devices_per_class(
        {"devices": {"requests": [exactly(GPU_CLASS, big), exactly(GPU_CLASS, 1)]}}, "t"
    ) == {GPU_CLASS: big + 1}


@pytest.mark.parametrize(
    ("request_body", "field"),
    [
        ({"name": "r", "firstAvailable": [{"name": "mig", "deviceClassName": "class-1"}]}, "firstAvailable"),
        ({"name": "r"}, "exactly"),
        (exactly("class-1", None, allocationMode="All"), "exactly.allocationMode"),
        (exactly("class-1", 1, adminAccess=True), "exactly.adminAccess"),
    ],
)
def test_kueue_refusals_name_the_request_and_its_field(request_body: dict[str, Any], field: str) -> None:
    with pytest.raises(ClaimError) as refused:
        devices_per_class({"devices": {"requests": [exactly("class-1", 1), request_body]}}, "t")
    assert str(refused.value).startswith(f"t.devices.requests[1].{field}:")


def test_a_first_available_choice_between_mig_and_full_gpus_is_refused_at_admission() -> None:
    """Issue #30 point 2 asks for MIG-or-full-GPU fungibility through firstAvailable; Kueue
    v0.19.2 refuses firstAvailable, and so does rayquota: the template's field is named."""
    TEMPLATES["either"] = {
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "firstAvailable": [
                                {"name": "mig", "deviceClassName": "mig-1g.example.com"},
                                {"name": "full", "deviceClassName": GPU_CLASS},
                            ],
                        }
                    ]
                }
            }
        }
    }
    try:
        charges = template_charges(one_pod(("g", "either")), "w", SETTINGS, lookup)
    finally:
        del TEMPLATES["either"]
    [error] = charges.errors
    assert error.startswith("w.spec.resourceClaims[0]: ResourceClaimTemplate either: spec.spec.devices")
    assert "requests[0].firstAvailable" in error and not charges.requests


# --- the CLI shows device quotas and usage by their mapped name ----------------------------------


def test_queues_workloads_and_explain_show_a_device_class_quota_by_its_mapped_name() -> None:
    text = json.dumps(dataclasses.asdict(state())).replace("nvidia.com/gpu", "example.com/gpu")
    dra_state = cli_views.QueueState(**json.loads(text))
    waiting = "insufficient quota for example.com/gpu (DRA DeviceClass gpu.example.com) in flavor a100"
    dra_state.workloads[2]["status"]["pendingReason"] = waiting
    assert "a100/example.com/gpu 8/8" in cli_views.queues_table(dra_state)
    rows = cli_views.workloads_table(dra_state).splitlines()
    third = next(row for row in rows if "rayjob/third" in row)
    assert "example.com/gpu 4" in third and waiting in third
    explained = cli_views.explain(dra_state, "rayjob", "third", "ns")
    assert "needs: example.com/gpu 4" in explained and "free now: a100/example.com/gpu 0" in explained
    assert "why it waits:" in explained and "example.com/gpu" in explained.split("why it waits:")[1]
