"""RayService upgrades beside KubeRay's real operator, reaching fake Ray heads by their Service
names (tests/e2e/kuberay_heads.py): the upgrade's new cluster is held at its pods until the
quota covers it, then KubeRay completes the upgrade, without a write fight."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest

from tests.e2e.beside_kuberay.harness import (
    Cell,
    Stage,
    gpu_service,
    held,
    pods_of,
    running_on_pool,
    service_clusters,
)
from tests.gate_sampler import GateSampler

SERVE_CONFIG = "applications:\n  - name: greeter\n    import_path: greeter:app\n    route_prefix: /\n"
# Long enough for the test to see the upgrade wait while the replaced cluster still holds its
# GPUs (once it is gone the new shape fits the 5 GPUs); short enough to see KubeRay delete it.
# The test checks that the quota it raised, not this delay, let the new cluster run.
DELETION_DELAY_S = 90


def served_service(
    namespace: str, name: str, dashboard_port: int, gpus_per_worker: int = 2
) -> dict[str, Any]:
    """`gpu_service` with a Serve config, its head's dashboard on the fake heads' port, and no
    proxy health checks of the head pod (kwok's pod addresses lead nowhere)."""
    body = gpu_service(namespace, name, workers=2, gpus_per_worker=gpus_per_worker)
    spec = body["spec"]
    spec.update(
        serveConfigV2=SERVE_CONFIG,
        excludeHeadPodFromServeSvc=True,
        rayClusterDeletionDelaySeconds=DELETION_DELAY_S,
    )
    head = spec["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    # Ports written out replace KubeRay's defaults: it wants Serve's too (for the serve Service).
    head["ports"] = [
        {"name": "dashboard", "containerPort": dashboard_port},
        {"name": "serve", "containerPort": 8000},
    ]
    return body


def _role(sampler: GateSampler, service: str, role: str) -> str | None:
    status = sampler.current("RayService")[service].get("status") or {}
    return (status.get(f"{role}ServiceStatus") or {}).get("rayClusterName") or None


def _waiting_workload(sampler: GateSampler, service: str) -> Mapping[str, Any] | None:
    """The service's Workload, while its reason names the GPUs it needs."""
    return next(
        (
            w
            for w in sampler.current("Workload").values()
            if w["metadata"]["name"].startswith(f"rayservice-{service}")
            and re.search(
                r"needs \d+ more nvidia\.com/gpu", str((w.get("status") or {}).get("pendingReason"))
            )
        ),
        None,
    )


def _gpus_by_pod_set(workload: Mapping[str, Any]) -> list[int]:
    """The GPUs of each GPU-holding pod set of a RayService's Workload's admission, sorted."""
    if not workload["metadata"]["name"].startswith("rayservice-up"):
        return []
    admission = (workload.get("status") or {}).get("admission") or {}
    usage = [
        int(str((ps.get("resourceUsage") or {}).get("nvidia.com/gpu", 0)))
        for ps in admission.get("podSetAssignments") or ()
    ]
    return sorted(g for g in usage if g)


def _one_gpu_workers(cell: Cell, service: str) -> None:
    """The user's edit: each worker asks for 1 GPU instead of 2 (a new shape: a new cluster)."""
    limits = {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"}
    path = "/spec/rayClusterConfig/workerGroupSpecs/0/template/spec/containers/0/resources"
    out = cell.patch(
        "rayservice",
        service,
        [{"op": "replace", "path": path, "value": {"limits": limits, "requests": limits}}],
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("first_serves", [False, True], ids=["before-first-serves", "after-first-serves"])
def test_a_rayservice_upgrade_under_a_tight_quota_waits_with_a_reason_then_completes_without_a_fight(
    stage: Stage, first_serves: bool
) -> None:
    """Issue 36's upgrade: RayService `up` (NewCluster; 2 workers x 2 GPUs) under a 5-GPU queue,
    its workers changed to 1 GPU each, before or after its first cluster serves. KubeRay
    prepares a new cluster beside the first (which holds its 4 GPUs until KubeRay deletes it):
    the Workload waits with a reason naming the GPUs and none of the new cluster's pods runs;
    once the quota is raised to 6, they run on the flavor (while the first cluster still holds
    its pods: the raise, not KubeRay's deletion delay, let them through), the new cluster serves
    and becomes the active one, and KubeRay deletes the first. The two operators never write
    one field back and forth."""
    cell, heads = Cell(stage, gpus=5), stage.heads
    sampler = cell.sampler
    try:
        cell.apply(served_service(cell.ns, "up", heads.dashboard_port))
        first = cell.wait(
            "KubeRay's first cluster", lambda: next(iter(service_clusters(sampler, "up")), None), 90
        )
        heads.add(first, serving=first_serves, namespace=cell.ns)
        cell.wait(
            "its 3 pods let through, Running on the flavor",
            lambda: running_on_pool(pods_of(sampler, first), 3),
            150,
        )
        if first_serves:
            cell.wait(
                "the first cluster serving, active", lambda: _role(sampler, "up", "active") == first, 120
            )
        else:
            # KubeRay reached the head and gave it the Serve config; its applications deploy.
            cell.wait("KubeRay's Serve config on the first head", lambda: heads.serve_puts(first) >= 1, 120)
            assert _role(sampler, "up", "active") is None
        _one_gpu_workers(cell, "up")
        new = cell.wait(
            "KubeRay's cluster for the new shape",
            lambda: next((n for n in service_clusters(sampler, "up") if n != first), None),
            120,
        )
        heads.add(new, serving=True, namespace=cell.ns)
        waiting = cell.wait(
            "the Workload waiting, with a reason", lambda: _waiting_workload(sampler, "up"), 90
        )
        cell.wait(
            "KubeRay's 3 pods for the new cluster, all held at the gate",
            lambda: len(pods := pods_of(sampler, new)) == 3 and all(held(p) for p in pods),
            90,
        )
        assert _waiting_workload(sampler, "up")
        # The first cluster still holds its 4 GPUs: only the raise can let the new one through.
        assert running_on_pool(pods_of(sampler, first), 3)
        cell.set_gpus(6)
        cell.wait(
            "the new cluster's pods let through, Running on the flavor",
            lambda: running_on_pool(pods_of(sampler, new), 3),
            150,
        )
        # POC hole 1, exact accounting: both clusters name their worker group "gpu", in two
        # shapes; the admission counts each cluster's own (2 x 2 GPUs and 2 x 1 GPU), not one
        # group's pods at either shape.
        assert sampler.first("Workload", lambda w: _gpus_by_pod_set(w) == [2, 4]), (
            "no admission counted the two clusters' same-named groups apart"
        )
        assert first in sampler.current("RayCluster") and len(pods_of(sampler, first)) == 3, (
            "the first cluster was gone before the new one ran: KubeRay's deletion, not the raise, made room"
        )
        cell.wait(
            "KubeRay making the new cluster the active one",
            lambda: _role(sampler, "up", "active") == new,
            120,
        )
        cell.wait(
            "KubeRay deleting the first cluster",
            lambda: first not in sampler.current("RayCluster") and not pods_of(sampler, first),
            DELETION_DELAY_S + 120,
        )
        assert _role(sampler, "up", "pending") is None
        sampler.assert_holds()
        sampler.assert_no_write_fight({"RayService/up": 1})
        print("waited with:", (waiting.get("status") or {}).get("pendingReason"))
    finally:
        cell.close(("rayservice", "up"))
