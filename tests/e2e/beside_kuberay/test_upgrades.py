"""RayService upgrades beside KubeRay's real operator, reaching fake Ray heads by their Service
names (tests/e2e/kuberay_heads.py): the upgrade's new cluster is held at its pods until the
quota covers it, then KubeRay completes the upgrade, without a write fight."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any

from tests.e2e.beside_kuberay.harness import (
    Cell,
    Stage,
    gpu_service,
    held,
    pods_of,
    run_cells,
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


def one_gpu_workers(cell: Cell, service: str) -> None:
    """The user's edit: each worker asks for 1 GPU instead of 2 (a new shape: a new cluster)."""
    limits = {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"}
    path = "/spec/rayClusterConfig/workerGroupSpecs/0/template/spec/containers/0/resources"
    out = cell.patch(
        "rayservice",
        service,
        [{"op": "replace", "path": path, "value": {"limits": limits, "requests": limits}}],
    )
    assert out.returncode == 0, out.stderr


def new_cluster_upgrade(cell: Cell, first_serves: bool) -> None:
    """Issue 36's upgrade: RayService `up` (NewCluster; 2 workers x 2 GPUs) under a 5-GPU queue,
    its workers changed to 1 GPU each, before or after its first cluster serves. KubeRay
    prepares a new cluster beside the first (which holds its 4 GPUs until KubeRay deletes it):
    the Workload waits with a reason naming the GPUs and none of the new cluster's pods runs;
    once the quota is raised to 6, they run on the flavor (while the first cluster still holds
    its pods: the raise, not KubeRay's deletion delay, let them through), the new cluster serves
    and becomes the active one, and KubeRay deletes the first. The two operators never write
    one field back and forth."""
    heads, sampler = cell.stage.heads, cell.sampler
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
        cell.wait("the first cluster serving, active", lambda: _role(sampler, "up", "active") == first, 120)
    else:
        # KubeRay reached the head and gave it the Serve config; its applications deploy.
        cell.wait("KubeRay's Serve config on the first head", lambda: heads.serve_puts(first) >= 1, 120)
        assert _role(sampler, "up", "active") is None
    one_gpu_workers(cell, "up")
    new = cell.wait(
        "KubeRay's cluster for the new shape",
        lambda: next((n for n in service_clusters(sampler, "up") if n != first), None),
        120,
    )
    heads.add(new, serving=True, namespace=cell.ns)
    waiting = cell.wait("the Workload waiting, with a reason", lambda: _waiting_workload(sampler, "up"), 90)
    cell.wait(
        "KubeRay's 3 pods for the new cluster, all held at the gate",
        lambda: len(pods := pods_of(sampler, new)) == 3 and all(held(p) for p in pods),
        90,
    )
    assert _waiting_workload(sampler, "up")
    # The reason names the cluster that waits (the new one), not the one it replaces, also
    # before the first serves (KubeRay then calls the new cluster pending and the first
    # neither active nor pending).
    reason = str((waiting.get("status") or {}).get("pendingReason"))
    assert f"cluster `{new}`" in reason and first not in reason, reason
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


# --- NewClusterWithIncrementalUpgrade: the test plays the gateway controller and the autoscaler --

GATEWAY_CONTROLLER = "rayquota.io/test-gateway-controller"


def _conditions(*types: str) -> list[dict[str, Any]]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return [
        {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": now} for t in types
    ]


def _play_gateway_controller(cell: Cell) -> None:
    """Mark KubeRay's Gateway and HTTPRoute of the namespace ready, as a gateway controller
    would (KubeRay steps an incremental upgrade only through ready ones); idempotent."""
    for kind, ready in (("gateways", _gateway_ready), ("httproutes", _route_ready)):
        out = cell.stage.kubectl(
            "get", f"{kind}.gateway.networking.k8s.io", "-n", cell.ns, "-o", "json", check=False
        )
        for obj in json.loads(out.stdout or "{}").get("items") or []:
            status = ready(obj)
            if status is not None:
                cell.stage.kubectl(
                    "patch", f"{kind}.gateway.networking.k8s.io", obj["metadata"]["name"], "-n", cell.ns,
                    "--subresource=status", "--type=merge", "-p", json.dumps({"status": status}), check=False,
                )  # fmt: skip


def _true(conditions: Any) -> set[str]:
    return {str(c.get("type")) for c in conditions or () if c.get("status") == "True"}


def _gateway_ready(gateway: Mapping[str, Any]) -> dict[str, Any] | None:
    # The Gateway CRD defaults both conditions to Unknown ("Waiting for controller"): their
    # presence says nothing, KubeRay reads their status.
    if _true((gateway.get("status") or {}).get("conditions")) >= {"Accepted", "Programmed"}:
        return None
    return {"conditions": _conditions("Accepted", "Programmed")}


def _route_ready(route: Mapping[str, Any]) -> dict[str, Any] | None:
    parents_now = (route.get("status") or {}).get("parents") or ()
    if parents_now and all(_true(p.get("conditions")) >= {"Accepted", "ResolvedRefs"} for p in parents_now):
        return None
    parents = [
        {
            "parentRef": dict(ref),
            "controllerName": GATEWAY_CONTROLLER,
            "conditions": _conditions("Accepted", "ResolvedRefs"),
        }
        for ref in (route.get("spec") or {}).get("parentRefs") or ()
    ]
    return {"parents": parents} if parents else None


def _new_version(cell: Cell, service: str) -> None:
    """The user's edit: the workers get an environment variable (a new cluster, the same shape)."""
    path = "/spec/rayClusterConfig/workerGroupSpecs/0/template/spec/containers/0/env"
    out = cell.patch(
        "rayservice", service, [{"op": "add", "path": path, "value": [{"name": "V", "value": "2"}]}]
    )
    assert out.returncode == 0, out.stderr


def _autoscale(cell: Cell, cluster: str, replicas: int) -> None:
    """What the Ray autoscaler writes as Serve's target capacity grows."""
    path = "/spec/workerGroupSpecs/0/replicas"
    out = cell.patch("raycluster", cluster, [{"op": "add", "path": path, "value": replicas}])
    assert out.returncode == 0, out.stderr


def _workers(sampler: GateSampler, cluster: str) -> list[Mapping[str, Any]]:
    return [
        p
        for p in pods_of(sampler, cluster)
        if (p["metadata"].get("labels") or {}).get("ray.io/node-type") == "worker"
    ]


def incremental_upgrade(cell: Cell) -> None:
    """Issue 36's POC hole 3 beside KubeRay: RayService `inc` (NewClusterWithIncrementalUpgrade,
    the autoscaler on; 2 workers x 1 GPU) under a 3-GPU queue, upgraded. KubeRay creates the new
    cluster at its minimum (the head alone); the test, as the Ray autoscaler, grows it worker by
    worker. Each step's pod is held at the scheduling gate until the slice covering it is
    admitted: the first worker fits (2 + 1 GPUs), the second waits with a reason until the quota
    is raised to 4. Then the new cluster serves, KubeRay shifts the traffic through its
    HTTPRoute (the test plays the gateway controller), promotes it and deletes the old one."""
    heads, sampler = cell.stage.heads, cell.sampler
    body = served_service(cell.ns, "inc", heads.dashboard_port, gpus_per_worker=1)
    options = {
        "maxSurgePercent": 50,
        "stepSizePercent": 50,
        "intervalSeconds": 1,
        "gatewayClassName": "rq-test",
    }
    body["spec"]["upgradeStrategy"] = {
        "type": "NewClusterWithIncrementalUpgrade",
        "clusterUpgradeOptions": options,
    }
    body["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = True
    body["spec"]["rayClusterDeletionDelaySeconds"] = 5

    def gateway_then(probe: Any) -> Any:
        def polled() -> Any:
            _play_gateway_controller(cell)
            return probe()

        return polled

    cell.apply(body)
    first = cell.wait(
        "KubeRay's first cluster", lambda: next(iter(service_clusters(sampler, "inc")), None), 90
    )
    heads.add(first, serving=True, namespace=cell.ns)
    cell.wait("its 3 pods Running on the flavor", lambda: running_on_pool(pods_of(sampler, first), 3), 150)
    cell.wait("the first cluster active", gateway_then(lambda: _role(sampler, "inc", "active") == first), 120)
    _new_version(cell, "inc")
    new = cell.wait(
        "KubeRay's new cluster",
        gateway_then(lambda: next((n for n in service_clusters(sampler, "inc") if n != first), None)),
        120,
    )
    heads.add(new, serving=False, namespace=cell.ns)  # its Serve applications deploy until let serve
    cell.wait(
        "the new cluster's head Running on the flavor",
        lambda: running_on_pool(pods_of(sampler, new), 1),
        120,
    )
    for replicas, fits in ((1, True), (2, False)):
        _autoscale(cell, new, replicas)
        cell.wait(
            f"step {replicas}: the new worker created behind the gate",
            lambda n=replicas: _newest_worker_was_held(sampler, new, n),
            90,
        )
        if not fits:
            waiting = cell.wait(
                "the step waiting, with a reason", lambda: _waiting_workload(sampler, "inc"), 90
            )
            # One pod shape in both clusters: one pod set, worded with both; the new one named.
            reason = str((waiting.get("status") or {}).get("pendingReason"))
            assert f"`{new}`" in reason, reason
            assert sum(held(p) for p in _workers(sampler, new)) == 1
            cell.set_gpus(4)
        cell.wait(
            f"step {replicas}: let through, Running on the flavor",
            lambda n=replicas: running_on_pool(pods_of(sampler, new), 1 + n),
            120,
        )
    heads.serve(new)
    cell.wait(
        "KubeRay promoting the new cluster",
        gateway_then(
            lambda: _role(sampler, "inc", "active") == new and _role(sampler, "inc", "pending") is None
        ),
        240,
    )
    cell.wait(
        "KubeRay deleting the old cluster",
        lambda: first not in sampler.current("RayCluster") and not pods_of(sampler, first),
        120,
    )
    sampler.assert_holds()
    sampler.assert_no_write_fight({"RayService/inc": 1, f"RayCluster/{new}": 2})


def _newest_worker_was_held(sampler: GateSampler, cluster: str, count: int) -> bool:
    """The cluster has ``count`` workers, and the newest was held at its gate when created."""
    workers = _workers(sampler, cluster)
    if len(workers) != count:
        return False
    newest = max(workers, key=lambda p: (str(p["metadata"].get("creationTimestamp")), p["metadata"]["name"]))
    uid = newest["metadata"].get("uid")
    return sampler.first("Pod", lambda p: p["metadata"].get("uid") == uid and held(p)) is not None


def test_rayservice_upgrades_wait_for_quota_at_their_pods_then_complete_without_a_fight(stage: Stage) -> None:
    """The upgrade cells side by side, each in namespaces of its own: NewCluster before and after
    the first cluster serves, and NewClusterWithIncrementalUpgrade."""
    run_cells(
        {
            "new-cluster, before the first serves": (
                Cell(stage, gpus=5),
                lambda c: new_cluster_upgrade(c, False),
                (("rayservice", "up"),),
            ),
            "new-cluster, after the first serves": (
                Cell(stage, gpus=5),
                lambda c: new_cluster_upgrade(c, True),
                (("rayservice", "up"),),
            ),
            "incremental": (Cell(stage, gpus=3), incremental_upgrade, (("rayservice", "inc"),)),
        }
    )
