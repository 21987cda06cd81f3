"""An operator upgrade that renames a running RayService's pod set (the shape digest grew the
template's required node affinity): the running pods keep their admission, on their flavor.

Phase one runs an operator whose ``shape_key`` is the old rule (no node affinity) in this
process; it admits the service's GPU worker on flavor ``second`` while ``first`` is full. Then
``first`` frees up, a workload of 2 GPUs waits (it fits neither flavor), and the old operator
stops. Phase two runs the operator as it is: the worker's pod set gets a new name. Throughout,
the sampler judges the gate's invariants, and here, per flavor, the GPUs of the live pods on
its nodes against what is admitted on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

import pytest
from kubernetes.utils import parse_quantity

from rayquota.operator.queue.adapters import rayservice
from rayquota.operator.queue.demand import podsets
from rayquota.operator.queue.demand.podsets import PodSetDemand
from tests.gate_invariants import holds as holds_resources
from tests.gate_invariants import pod_requests
from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import Quota, gpu_job, running_operator, workload_of
from tests.integration.ray.kubehelpers import Kube, wait_for
from tests.polling import holds

PREFIX = "qrename"  # this test's own operators: the session's watches q-*
POOL = "rayquota.io/gpu-pool"
GPU = "nvidia.com/gpu"


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


def old_shape_key(pod_set: PodSetDemand) -> str:
    """The digest before the upgrade: the required node affinity was not part of it."""
    return podsets.shape_key(PodSetDemand(**{**pod_set.__dict__, "node_affinity": ()}))


def gpu_service(queue: str) -> dict[str, Any]:
    """A RayService whose 1-GPU worker requires a node affinity that every node satisfies."""
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}
                ]
            }
        }
    }
    small = {"requests": {"cpu": "500m", "memory": "1Gi"}}
    worker = {"requests": {"cpu": "1", "memory": "1Gi", GPU: "1"}, "limits": {GPU: "1"}}
    config = {
        "rayVersion": "2.41.0",
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
            {"name": "ray-head", "image": "rayproject/ray:2.41.0", "resources": small}]}}},
        "workerGroupSpecs": [{
            "groupName": "gpu", "replicas": 1, "minReplicas": 1, "maxReplicas": 1, "rayStartParams": {},
            "template": {"spec": {"affinity": affinity, "containers": [
                {"name": "ray-worker", "image": "rayproject/ray:2.41.0", "resources": worker}]}},
        }],
    }  # fmt: skip
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "svc", "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"serveConfigV2": "applications: []", "rayClusterConfig": config},
    }


def flavor_overruns(sampler: GateSampler, pools: Mapping[str, str]) -> list[str]:
    """Every state where the live pods on a flavor's nodes hold more GPUs than the namespace's
    Workloads are admitted on that flavor (``pools``: flavor -> its pool label value)."""
    sampler.sync()
    pool_flavor = {pool: flavor for flavor, pool in pools.items()}
    found: list[str] = []
    for version, state in sampler.states():
        held: dict[str, Decimal] = {}
        admitted: dict[str, Decimal] = {}
        holders = {
            str(ref["uid"])
            for (kind, _), obj in state.items()
            if kind == "Pod" and holds_resources(obj)
            for ref in obj["metadata"].get("ownerReferences") or []
        }
        for (kind, _), obj in state.items():
            if kind == "Pod" and holds_resources(obj):
                flavor = pool_flavor.get(((obj.get("spec") or {}).get("nodeSelector") or {}).get(POOL, ""))
                gpus = pod_requests(obj).get(GPU, Decimal(0))
                if flavor is not None and gpus:
                    held[flavor] = held.get(flavor, Decimal(0)) + gpus
            # A deleted object's Workload counts while its pods still hold resources.
            departed = kind == "DepartedWorkload" and holders & {
                str(ref["uid"]) for ref in obj["metadata"].get("ownerReferences") or []
            }
            if kind == "Workload" or departed:
                admission = (obj.get("status") or {}).get("admission") or {}
                for ps in admission.get("podSetAssignments") or []:
                    flavor = (ps.get("flavors") or {}).get(GPU)
                    gpus = Decimal(parse_quantity((ps.get("resourceUsage") or {}).get(GPU, "0")))
                    if flavor is not None:
                        admitted[flavor] = admitted.get(flavor, Decimal(0)) + gpus
        for flavor, gpus in held.items():
            if gpus > admitted.get(flavor, Decimal(0)):
                found.append(
                    f"at revision {version.revision}: pods on {flavor} hold {gpus} GPUs, "
                    f"{admitted.get(flavor, 0)} admitted there"
                )
    return found


def worker_pods(kube: Kube) -> list[dict[str, Any]]:
    return [
        p
        for p in kube.list("pods")
        if (p["metadata"].get("labels") or {}).get("ray.io/node-type") == "worker"
        and not p["metadata"].get("deletionTimestamp")
    ]


def admission_of(kube: Kube, kind: str, name: str) -> dict[str, Any]:
    wl = workload_of(kube, kind, name) or {}
    return dict((wl.get("status") or {}).get("admission") or {})


def admitted_names(kube: Kube) -> set[str]:
    return {ps["name"] for ps in admission_of(kube, "RayService", "svc").get("podSetAssignments") or []}


def spec_names(kube: Kube) -> set[str]:
    wl = workload_of(kube, "RayService", "svc") or {}
    return {ps["name"] for ps in (wl.get("spec") or {}).get("podSets") or []}


@pytest.fixture
def sampler(control_plane: Any, crds_installed: None, namespace: str, quota: Quota) -> Iterator[GateSampler]:
    cq = quota.cluster_queue("serve", {quota.flavor("first", "h100"): 1, quota.flavor("second", "a100"): 2})
    quota.local_queue("serve", cq)
    watching = GateSampler(str(control_plane.kubeconfig), namespace, cq, None).start()
    try:
        yield watching
    finally:
        watching.close()


def test_an_upgrade_that_renames_a_running_pod_set_keeps_its_pods_admitted_on_their_flavor(
    kube: Kube, quota: Quota, sampler: GateSampler, monkeypatch: pytest.MonkeyPatch
) -> None:
    pools = {quota.name("first"): "h100", quota.name("second"): "a100"}
    blocker = gpu_job("blocker", "serve", parallelism=1, completions=None, gpus=1)
    monkeypatch.setattr(rayservice, "shape_key", old_shape_key)
    with running_operator(PREFIX):
        kube.apply(blocker)
        wait_for("the blocker admitted on first", lambda: admission_of(kube, "Job", "blocker"), timeout_s=60)
        kube.apply(gpu_service("serve"))
        pod = wait_for(
            "the service's worker running",
            lambda: next(
                (p for p in worker_pods(kube) if p.get("status", {}).get("phase") == "Running"), None
            ),
            timeout_s=120,
        )
        assert pod["spec"]["nodeSelector"][POOL] == "a100"  # on second: first was full
        old_names = admitted_names(kube)
        kube.kubectl("delete", "job", "blocker", "--cascade=foreground", "--wait=true")
        kube.apply(gpu_job("big", "serve", parallelism=1, completions=None, gpus=2))
        wait_for("big waiting", lambda: workload_of(kube, "Job", "big"), timeout_s=60)
    monkeypatch.undo()

    with running_operator(PREFIX):
        old_worker = {name for name in old_names if name.startswith("gpu-")}
        wait_for("the worker's pod set renamed", lambda: spec_names(kube) - old_names, timeout_s=60)
        assert not spec_names(kube) & old_worker

        def unchanged() -> bool:
            pods = worker_pods(kube)
            return not admission_of(kube, "Job", "big") and [p["metadata"]["uid"] for p in pods] == [
                pod["metadata"]["uid"]
            ]

        holds("big waits and the service's worker keeps running", unchanged, seconds=10)
        renamed = admitted_names(kube)
        assert renamed == spec_names(kube), json.dumps([sorted(renamed), sorted(spec_names(kube))])
    problems = flavor_overruns(sampler, pools) + sampler.violations()
    assert not problems, "\n".join(problems)
