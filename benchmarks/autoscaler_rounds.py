"""One side of the autoscaler benchmark (benchmarks/autoscaler_side_by_side.py): RayCluster ``rc``
scaled by Ray's real autoscaler, round after round.

The node agent of tests/integration/autoscaler runs a real Ray head (and the autoscaler beside
it, with the RayCluster's ServiceAccount token) for the head pod kwok runs, and a real Ray worker
for each worker pod. Each round: a driver asks for a 1-GPU task; the autoscaler raises the
worker group's replicas; (held) the scale-up waits until the holder, a second RayCluster holding
the queue's only GPU, is deleted; the pod is created and Running; its Ray node joins; the task
answers from it. The idle timeout is then lowered so that the autoscaler removes the worker, and
raised again once it is gone. Marks come from watches of the side's namespace
(benchmarks/autoscaler_watch.py), the head's state API (the round's new Ray node first listed
ALIVE, polled every 0.1 s) and the driver (task answered), all on time.monotonic()'s clock.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import autoscaler_timeline as tl
from benchmarks.autoscaler_watch import History, RayNodes, alive_workers
from rayquota.localcluster.cluster import LocalCluster
from tests.integration.autoscaler.clusters import (
    IDLE_S,
    KEEP_IDLE_WORKERS_S,
    autoscaled_cluster,
    wait_for_autoscaler,
    wait_for_ray,
)
from tests.integration.autoscaler.node_agent import NodeAgent

CLUSTER = "rc"
# What the a100 flavor gives rayquota's pods (docs/autoscaler.md), written into the unqueued
# cluster's worker template so that its pods land on the same fake nodes.
A100_SELECTOR = {"rayquota.io/gpu-pool": "a100"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SCALE_DOWN_S = 300.0
HOLDER_ADMITTED_S = 300.0
WAITING_SEEN_S = 120.0

# One GPU, no CPU; it prints the pod its Ray node runs for and when the answer came
# (time.monotonic(): CLOCK_MONOTONIC, one clock for every process of the machine).
DRIVER = """
import json, os, sys, time, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
@ray.remote(num_gpus=1, num_cpus=0)
def where():
    return os.environ.get("RAY_CLOUD_INSTANCE_ID")
pod = ray.get(where.remote())
print("ANSWER", json.dumps({"pod": pod, "at": time.monotonic()}), flush=True)
"""


@dataclass(frozen=True)
class Side:
    label: str  # "rayquota, quota free"
    operator: str
    cluster: LocalCluster
    namespace: str
    version: str  # the autoscaler's: v2 or v1
    queued: bool
    held: bool
    workdir: Path


@dataclass
class SideResult:
    label: str
    operator: str
    autoscaler: str
    namespace: str
    rounds_asked: int
    intervals: list[dict[str, float]] = field(default_factory=list)  # per round, seconds
    marks: list[dict[str, float]] = field(default_factory=list)  # per round, from its driver's start
    summary: dict[str, tl.Stat] = field(default_factory=dict)
    head_and_autoscaler_s: float = 0.0  # the RayCluster's creation to the autoscaler started
    load_start: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_end: tuple[float, float, float] = (0.0, 0.0, 0.0)
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    error: str = ""


def loadavg() -> tuple[float, float, float]:
    return tl.parse_loadavg(Path("/proc/loadavg").read_text())


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---- manifests ---------------------------------------------------------------------------------


def scaled_cluster(version: str, queued: bool) -> dict[str, Any]:
    """tests/integration/autoscaler's cluster: no worker at first, at most 1 with 1 GPU, idle
    workers kept until a round lowers the timeout. v1 has the cluster's idle timeout only;
    unqueued, no queue label and the a100 flavor's placement written in."""
    cluster = autoscaled_cluster(CLUSTER, version)
    spec = cluster["spec"]
    if version == "v1":
        spec["autoscalerOptions"]["idleTimeoutSeconds"] = KEEP_IDLE_WORKERS_S
        del spec["workerGroupSpecs"][0]["idleTimeoutSeconds"]
    if not queued:
        del cluster["metadata"]["labels"]
        pod = spec["workerGroupSpecs"][0]["template"]["spec"]
        pod["nodeSelector"] = dict(A100_SELECTOR)
        pod["tolerations"] = [dict(GPU_TOLERATION)]
    return cluster


def holder_cluster(name: str) -> dict[str, Any]:
    """A queued RayCluster with one 1-GPU worker and no autoscaler: it holds the queue's GPU."""
    cluster = autoscaled_cluster(name)
    spec = copy.deepcopy(cluster["spec"])
    del spec["autoscalerOptions"]
    spec["enableInTreeAutoscaling"] = False
    group = spec["workerGroupSpecs"][0]
    group.update({"groupName": "holders", "replicas": 1, "minReplicas": 1, "maxReplicas": 1})
    del group["idleTimeoutSeconds"]
    return {**cluster, "spec": spec}


def idle_timeout_patch(version: str, seconds: int) -> str:
    """The JSON patch of the idle timeout the autoscaler reads: the group's (v2), the cluster's (v1)."""
    path = (
        "/spec/workerGroupSpecs/0/idleTimeoutSeconds"
        if version == "v2"
        else "/spec/autoscalerOptions/idleTimeoutSeconds"
    )
    return json.dumps([{"op": "replace", "path": path, "value": seconds}])


def driver_answer(output: str) -> tuple[str, float] | None:
    """The pod the driver's task ran on and when its answer came, from the driver's output
    (Ray's own warnings may come on the same stream); None before it answered."""
    for line in reversed(output.splitlines()):
        if line.startswith("ANSWER "):
            answer = json.loads(line.removeprefix("ANSWER "))
            return str(answer["pod"]), float(answer["at"])
    return None


# ---- a side ------------------------------------------------------------------------------------


@dataclass
class Watches:
    clusters: History
    pods: History
    workloads: History | None

    def workload_events(self) -> list[tl.Seen]:
        return self.workloads.events() if self.workloads is not None else []


@contextlib.contextmanager
def watching(side: Side) -> Iterator[Watches]:
    kubeconfig, ns = side.cluster.kubeconfig, side.namespace
    with (
        History(kubeconfig, ns, group="ray.io", plural="rayclusters") as clusters,
        History(kubeconfig, ns, plural="pods") as pods,
        (
            History(kubeconfig, ns, group="rayquota.io", version="v1alpha1", plural="workloads")
            if side.queued
            else contextlib.nullcontext(None)
        ) as workloads,
    ):
        yield Watches(clusters, pods, workloads)


@contextlib.contextmanager
def driver_process(agent: NodeAgent, output: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The driver, its output in a file (never a pipe a long wait could fill); ended by its PID."""
    assert agent.head is not None
    with output.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", DRIVER, f"127.0.0.1:{agent.head.gcs_port}"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def run_side(side: Side, rounds: int) -> SideResult:
    """``rounds`` rounds on the side; a failure ends the side with what it has measured."""
    result = SideResult(side.label, side.operator, side.version, side.namespace, rounds, load_start=loadavg())
    began = time.monotonic()
    kubectl = side_kubectl(side)
    agent = NodeAgent(side.cluster.kubeconfig, side.namespace, CLUSTER, loopback_pod_ips=side.version == "v1")
    try:
        with watching(side) as watches:
            kubectl("create", "-f", "-", input=json.dumps(scaled_cluster(side.version, side.queued)))
            agent.start()
            wait_for_autoscaler(agent)
            result.head_and_autoscaler_s = time.monotonic() - began
            say(f"[{side.label}] Ray head and autoscaler up after {result.head_and_autoscaler_s:.0f} s")
            assert agent.head is not None
            with RayNodes(functools.partial(alive_workers, agent.head.dashboard_url)) as nodes:
                for i in range(rounds):
                    marks = one_round(side, i, agent, nodes, watches, result.notes)
                    result.marks.append(relative(marks, marks[tl.DRIVER]))
                    spans = tl.HELD_SPANS if side.held else tl.FREE_SPANS
                    result.intervals.append({k: round(v, 3) for k, v in tl.intervals(marks, spans).items()})
                    say(f"[{side.label}] round {i + 1}/{rounds}: {result.intervals[-1]}")
            result.notes += [f"node agent: {e}" for e in agent.errors]
    except Exception as exc:  # the side ends; what it measured is reported with the error
        result.error = f"round {len(result.intervals) + 1}: {type(exc).__name__}: {str(exc)[:1500]}"
        say(f"[{side.label}] FAILED {result.error}\n{agent.describe()}")
    finally:
        agent.stop()
        kubectl("delete", "rayclusters", "--all", "--wait=false", check=False)
    result.summary = tl.summarize(result.intervals)
    result.load_end = loadavg()
    result.wall_s = round(time.monotonic() - began, 1)
    return result


def side_kubectl(side: Side) -> Callable[..., subprocess.CompletedProcess[str]]:
    def kubectl(*args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        return side.cluster.kubectl("-n", side.namespace, *args, input=input, check=check, timeout=120)

    return kubectl


# ---- a round -----------------------------------------------------------------------------------


def one_round(
    side: Side, i: int, agent: NodeAgent, nodes: RayNodes, watches: Watches, notes: list[str]
) -> dict[str, float]:
    kubectl = side_kubectl(side)
    marks: dict[str, float] = {}
    holder = f"holder-{i}"
    if side.held:
        hold_the_gpu(side, holder, watches)
    output = side.workdir / f"driver-{side.namespace}-{i}.log"
    known = list(nodes.joined)  # the Ray workers of earlier rounds
    start = marks[tl.DRIVER] = time.monotonic()
    with driver_process(agent, output) as driver:
        request = wait_for_ray(
            "the autoscaler's request (replicas 1)",
            lambda: tl.first(watches.clusters.events(), start, asks_for_a_worker),
            agent,
        )
        marks[tl.REQUEST] = request.t
        if side.held:
            marks.update(free_the_gpu(side, holder, start, watches, notes))
        running = wait_for_ray(
            "the worker pod Running",
            lambda: tl.first(watches.pods.events(), start, lambda s: worker(s) and tl.is_running(s.obj)),
            agent,
        )
        pod = running.name
        marks[tl.POD_RUNNING] = running.t
        created = tl.first(watches.pods.events(), start, lambda s: s.name == pod)
        marks[tl.POD_CREATED] = created.t if created is not None else running.t

        def said() -> str:
            return output.read_text(errors="replace")

        wait_for_ray(
            "the driver's GPU task to answer",
            lambda: driver_answer(said()) or driver.poll() is not None,
            agent,
            lambda: f"--- the driver:\n{said()[-2000:]}",
        )
        answer = driver_answer(said())
        if answer is None:
            raise RuntimeError(f"the driver exited without an answer: {said()[-2000:]}")
        ran_on, marks[tl.TASK_DONE] = answer
        if ran_on != pod:
            notes.append(f"round {i + 1}: the task ran on {ran_on!r}, not on the new pod {pod!r}")
    marks[tl.NODE_JOINED] = wait_for_ray("the new Ray node seen ALIVE", lambda: nodes.first_new(known), agent)
    if marks[tl.NODE_JOINED] > marks[tl.TASK_DONE]:
        notes.append(f"round {i + 1}: the Ray node was seen joining after its task answered")
    starts = agent.workers[pod].starts if pod in agent.workers else 0
    if starts > 1:  # Ray gave up on a `ray start` and the agent started it again (node_agent.py)
        notes.append(f"round {i + 1}: the Ray worker of {pod} took {starts} `ray start` attempts")
    if side.queued:
        admitted = tl.first(
            watches.workload_events(),
            start,
            lambda s: tl.owned_by(s.obj, "RayCluster", CLUSTER) and tl.admitted_gpus(s.obj) >= 1,
        )
        if admitted is not None:
            marks[tl.ADMITTED] = admitted.t
    scale_down(side, watches, kubectl)
    return marks


def worker(seen: tl.Seen) -> bool:
    return seen.event != "DELETED" and tl.is_worker_of(seen.obj, CLUSTER)


def asks_for_a_worker(seen: tl.Seen) -> bool:
    return seen.name == CLUSTER and seen.event != "DELETED" and tl.group_replicas(seen.obj) >= 1


def hold_the_gpu(side: Side, holder: str, watches: Watches) -> None:
    """The holder created and admitted, its GPU worker Running: the queue's one GPU is taken."""
    side_kubectl(side)("create", "-f", "-", input=json.dumps(holder_cluster(holder)))

    def holding() -> bool:
        workloads = watches.workloads.current() if watches.workloads else {}
        admitted = any(
            tl.owned_by(w, "RayCluster", holder) and tl.admitted_gpus(w) >= 1 for w in workloads.values()
        )
        pods = watches.pods.current().values()
        return admitted and any(tl.is_worker_of(p, holder, "holders") and tl.is_running(p) for p in pods)

    wait_until(f"the holder {holder} admitted with its GPU worker Running", holding, HOLDER_ADMITTED_S)


def free_the_gpu(
    side: Side, holder: str, since: float, watches: Watches, notes: list[str]
) -> dict[str, float]:
    """Once the scale-up is seen waiting (the Workload naming the group, the first such event
    since the round's start) with no worker pod, the holder is deleted; its pods' going and its
    Workload's release are read afterwards."""
    waiting = wait_until(
        "the scale-up waiting, naming the group",
        lambda: tl.first(
            watches.workload_events(),
            since,
            lambda s: tl.owned_by(s.obj, "RayCluster", CLUSTER) and tl.waits_for_group(s.obj),
        ),
        WAITING_SEEN_S,
    )
    if any(tl.is_worker_of(p, CLUSTER) for p in watches.pods.current().values()):
        notes.append("a worker pod existed while the scale-up waited")
    holder_pods = [n for n, p in watches.pods.current().items() if tl.cluster_of(p) == holder]
    deleted = time.monotonic()
    side_kubectl(side)("delete", "raycluster", holder, "--wait=false")

    def freed() -> tl.Seen | None:
        return tl.first(
            watches.workload_events(),
            deleted,
            lambda s: tl.owned_by(s.obj, "RayCluster", holder) and tl.quota_released(s),
        )

    released = wait_until(f"the holder {holder}'s quota released", freed, SCALE_DOWN_S)
    marks = {tl.WAITING: waiting.t, tl.HOLDER_DELETED: deleted, tl.QUOTA_FREED: released.t}
    pods_gone = tl.last_gone(watches.pods.events(), deleted, holder_pods)
    if pods_gone is not None:
        marks[tl.HOLDER_PODS_GONE] = pods_gone
    return marks


def scale_down(side: Side, watches: Watches, kubectl: Callable[..., Any]) -> None:
    """The idle timeout lowered until the autoscaler has removed the worker (replicas 0, no
    worker pod, the Workload shrunk), then raised again for the next round."""
    kubectl("patch", "raycluster", CLUSTER, "--type=json", "-p", idle_timeout_patch(side.version, IDLE_S))

    def gone() -> bool:
        cluster = watches.clusters.current().get(CLUSTER)
        if cluster is None or tl.group_replicas(cluster) != 0:
            return False
        if any(tl.is_worker_of(p, CLUSTER) for p in watches.pods.current().values()):
            return False
        workloads = watches.workloads.current().values() if watches.workloads else []
        return not any(tl.owned_by(w, "RayCluster", CLUSTER) and tl.admitted_gpus(w) for w in workloads)

    wait_until("the idle worker removed", gone, SCALE_DOWN_S)
    kubectl(
        "patch",
        "raycluster",
        CLUSTER,
        "--type=json",
        "-p",
        idle_timeout_patch(side.version, KEEP_IDLE_WORKERS_S),
    )


def wait_until(what: str, probe: Callable[[], Any], timeout_s: float, interval_s: float = 0.2) -> Any:
    """probe()'s first truthy value, polled until ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(interval_s)


def relative(marks: Mapping[str, float], start: float) -> dict[str, float]:
    return {k: round(v - start, 3) for k, v in marks.items()}
