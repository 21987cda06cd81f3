"""The gate matrix's RayService cells (NewCluster and incremental upgrades, rollbacks), and the
scenario of every cell by kind."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tests.integration.queue.gate_cells import (
    QUEUE,
    Env,
    job_scenario,
    pods_running,
    raycluster_scenario,
    rayjob_scenario,
)
from tests.integration.queue.gate_jobset_cells import jobset_scenario
from tests.integration.queue.test_rayservice_incremental_quota import autoscale
from tests.integration.queue.test_rayservice_quota import with_gpu_workers
from tests.integration.ray.kubehelpers import condition
from tests.integration.ray.rayhead import RayHead
from tests.integration.ray.rayservice_support import NEW_IMAGE, OLD_IMAGE, manifest

SERVICE = "greeter"


def head_image(body: Mapping[str, Any]) -> str:
    return str(
        body["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
    )


def service_body(env: Env, incremental: bool) -> dict[str, Any]:
    upgrade = None
    if incremental:
        options = {"maxSurgePercent": 50, "stepSizePercent": 50, "intervalSeconds": 2,
                   "gatewayClassName": env.gateway_class}  # fmt: skip
        upgrade = {"type": "NewClusterWithIncrementalUpgrade", "clusterUpgradeOptions": options}
    body = manifest(upgrade, delay_s=1)
    config = body["spec"]["rayClusterConfig"]
    with_gpu_workers(body["spec"], 1)
    for group in config["workerGroupSpecs"]:
        group["template"]["spec"]["tolerations"] = []  # the queue adds the flavor's
    if incremental:
        config["enableInTreeAutoscaling"] = True
        config["workerGroupSpecs"][0].update(replicas=2, minReplicas=0, maxReplicas=2)
    if env.cell.suspended:
        config["suspend"] = True  # the queue's gate, as a Kueue user writes it
    body["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": QUEUE}
    return body


def status_of(env: Env) -> Mapping[str, Any]:
    return (env.obj("RayService", SERVICE) or {}).get("status") or {}


def cluster_of(env: Env, role: str) -> str | None:
    return (status_of(env).get(f"{role}ServiceStatus") or {}).get("rayClusterName")


def serving(env: Env) -> str | None:
    """The active cluster, once the service is Ready with no upgrade under way."""
    obj = env.obj("RayService", SERVICE)
    ready = (condition(dict(obj), "Ready") or {}).get("status") == "True" if obj else False
    return cluster_of(env, "active") if ready and not cluster_of(env, "pending") else None


def only_cluster_left(env: Env, name: str) -> bool:
    clusters = [
        c
        for c, body in env.sampler.current("RayCluster").items()
        if not body["metadata"].get("deletionTimestamp")
    ]
    return clusters == [name] and not [
        p
        for p in env.sampler.current("Pod").values()
        if (p["metadata"].get("labels") or {}).get("ray.io/cluster") != name
    ]


def rayservice_scenario(env: Env) -> None:
    incremental = env.cell.kind.endswith("Incremental")
    head_b, head_a = env.heads
    transitions = list(env.cell.transitions)
    before = "upgrade-before" in transitions
    if not before:
        env.route("*", head_b.dashboard_url)
    body = service_body(env, incremental)
    env.kube.apply(body)
    if before:  # the first cluster runs but never serves: the upgrade replaces it
        first = env.wait("the first cluster", lambda: cluster_of(env, "pending"))
        pods = 1 + body["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"]
        env.wait("its pods running", pods_running(env, first, pods))
        env.kube.patch("rayservice", SERVICE, NEW_IMAGE)
        env.route("*", head_a.dashboard_url)
        second = env.wait("the new cluster serving", lambda: (name := serving(env)) != first and name)
        env.wait("the first cluster and its pods gone", lambda: only_cluster_left(env, second))
        transitions.remove("upgrade-before")
    first = env.wait("the service serving", lambda: serving(env))
    head = head_a if before else head_b  # the serving cluster's
    for transition in transitions:
        env.route(first, head.dashboard_url)  # it keeps its head whatever "*" maps to next
        if transition in ("upgrade-after", "incremental-step"):
            head = head_b if head is head_a else head_a
            first = upgrade(env, first, incremental, head)
        elif transition == "rollback":
            roll_back(env, first, incremental)
        else:
            raise ValueError(transition)


def images(env: Env) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the patch back to the current head image, the patch to the other one)."""
    live = env.obj("RayService", SERVICE)
    assert live is not None
    on_old = head_image(live) == head_image(OLD_IMAGE)
    return (OLD_IMAGE, NEW_IMAGE) if on_old else (NEW_IMAGE, OLD_IMAGE)


def upgrade(env: Env, first: str, incremental: bool, head: RayHead) -> str:
    """A new image: a new cluster (on the other head) serves, the old one and its pods go."""
    env.route("*", head.dashboard_url)
    env.kube.patch("rayservice", SERVICE, images(env)[1])
    pending = env.wait("a pending cluster", lambda: cluster_of(env, "pending"))
    if incremental:
        incremental_steps(env, first, pending)
    new = env.wait("the new cluster serving", lambda: (name := serving(env)) != first and name)
    env.wait("the old cluster and its pods gone", lambda: only_cluster_left(env, new))
    return str(new)


def roll_back(env: Env, first: str, incremental: bool) -> None:
    """The new cluster gets no dashboard (it never serves), and the change is reverted."""
    env.route("*", None)
    original, changed = images(env)
    env.kube.patch("rayservice", SERVICE, changed)
    pending = env.wait("a pending cluster", lambda: cluster_of(env, "pending"))
    if incremental:
        env.wait("the pending head running", lambda: len(env.pods(pending, running=True)) >= 1)
    env.kube.patch("rayservice", SERVICE, original)
    env.wait("the pending cluster dropped", lambda: cluster_of(env, "pending") is None)
    env.wait("only the first cluster left", lambda: only_cluster_left(env, first))
    env.wait("the first cluster serving on its own again", lambda: serving(env) == first)


def incremental_steps(env: Env, first: str, pending: str) -> None:
    """Play the Ray autoscaler through an incremental upgrade: the pending cluster grows a
    worker at a time as its Serve capacity rises (a scale-up slice each), the active one shrinks."""

    def capacities(active_at: int | None, pending_at: int) -> Callable[[Mapping[str, Any]], bool]:
        def reached(service: Mapping[str, Any]) -> bool:
            status = service.get("status") or {}
            active, new = status.get("activeServiceStatus") or {}, status.get("pendingServiceStatus") or {}
            return (
                service["metadata"]["name"] == SERVICE
                and new.get("rayClusterName") == pending
                and active_at in (None, active.get("targetCapacity"))
                and new.get("targetCapacity") == pending_at
            )

        return reached

    # States seen in any version: with 2 s steps one lasts a few seconds, which a loaded
    # machine's poll can miss (the upgrade then goes on without the test).
    env.wait("the pending head running", lambda: len(env.pods(pending, running=True)) == 1)
    env.wait("the pending cluster at the surge", lambda: env.sampler.ever("RayService", capacities(None, 50)))
    autoscale(env.kube, pending, 1)
    env.wait("the pending cluster's first worker", lambda: len(env.pods(pending, running=True)) == 2)
    env.wait(
        "the active at 50 %, the pending at 100 %",
        lambda: env.sampler.ever("RayService", capacities(50, 100)),
    )
    try:
        autoscale(env.kube, first, 1)
    except AssertionError:  # the upgrade may have retired the old cluster meanwhile
        if env.obj("RayCluster", first) is not None:
            raise
    autoscale(env.kube, pending, 2)
    env.wait("the pending cluster's second worker", lambda: len(env.pods(pending, running=True)) == 3)


SCENARIOS: dict[str, Callable[[Env], None]] = {
    "RayJob": rayjob_scenario,
    "RayCluster": raycluster_scenario,
    "RayService": rayservice_scenario,
    "Job": job_scenario,
    "JobSet": jobset_scenario,
}


def scenario_of(env: Env) -> None:
    SCENARIOS[env.cell.kind.split("/")[0]](env)
