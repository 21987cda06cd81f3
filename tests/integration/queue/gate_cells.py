"""The gate matrix's cells: one queued Ray object in a namespace of its own, taken through a
list of transitions while a :class:`~tests.gate_sampler.GateSampler` watches every state.

A cell is (kind, created suspended or not, webhooks on or off, transitions). Cells run side by
side (threads), each with its own namespace, ClusterQueue and sampler, so the matrix costs
about as long as its slowest cell. Waits read the sampler's watched state, not kubectl, so many
cells can poll at once on a small machine.
"""

from __future__ import annotations

import copy
import json
import secrets
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rayquota.localcluster.nodes import NodePool
from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import Quota, gpu_job, gpu_rayjob, pool_placement
from tests.integration.ray.kubehelpers import Kube, condition, wait_for
from tests.integration.ray.rayhead import RayHead
from tests.integration.ray.rayservice_support import Dashboards
from tests.jobset_controller import JobSetController

RAYJOB_MODES = ("K8sJobMode", "HTTPMode", "SidecarMode", "InteractiveMode")
LONG_ENTRYPOINT = "python -c 'import time; time.sleep(900)'"  # runs until the cell stops it
# The submitter pod stays Running (kwok would complete it at once, before it submitted anything).
MANUAL_SUBMITTER = {
    "metadata": {"labels": {"rayquota.io/kwok-manual-completion": "true"}},
    "spec": {"containers": [{"name": "submitter", "image": "rayproject/ray:2.41.0"}]},
}
GPUS = 4  # each cell's ClusterQueue
JOB_NAME = "batch.kubernetes.io/job-name"  # the Job controller's label on its pods
POOL_LABEL = "rayquota.io/gpu-pool"  # what Quota.flavor selects nodes by
QUEUE = "team"
TIMEOUT_S = 240.0
# The local resolver's map is one JSON file per operator: cells of one operator share it.
_MAP_LOCK = threading.Lock()


@dataclass(frozen=True)
class Cell:
    kind: str  # RayJob/<mode> | RayCluster | RayService/NewCluster | RayService/Incremental | Job | JobSet
    suspended: bool
    webhooks: bool
    transitions: tuple[str, ...]

    @property
    def id(self) -> str:
        created = "suspended" if self.suspended else "unsuspended"
        hooks = "webhooks" if self.webhooks else "nowebhooks"
        return f"{self.kind}-{created}-{hooks}-{'+'.join(self.transitions)}"


@dataclass
class Operator:
    prefix: str  # the namespaces it watches: <prefix>-*
    dashboard_map: Path


@dataclass
class Env:
    """What a cell's scenario works with."""

    cell: Cell
    kube: Kube
    quota: Quota
    sampler: GateSampler
    dashboard_map: Path
    heads: tuple[RayHead, RayHead]  # (first clusters' head, upgrades' head)
    gateway_class: str | None
    jobset_controller: JobSetController | None = None  # JobSet cells: JobSet's controller, played

    def route(self, target: str, url: str | None) -> None:
        """Map a cluster (or ``*``: any other) of this namespace to a Ray head; None: to none."""
        with _MAP_LOCK:
            routes = Dashboards(self.dashboard_map, self.kube.ns)
            if url is None:
                mapping = json.loads(self.dashboard_map.read_text() or "{}")
                mapping.pop(f"{self.kube.ns}/{target}", None)
                self.dashboard_map.write_text(json.dumps(mapping))
            else:
                routes.route(target, url)

    def wait(self, what: str, probe: Callable[[], Any], timeout_s: float = TIMEOUT_S) -> Any:
        return wait_for(f"{self.cell.id}: {what}", probe, timeout_s=timeout_s, interval_s=0.3)

    # --- reading the watched state -------------------------------------------------------------

    def obj(self, kind: str, name: str) -> Mapping[str, Any] | None:
        return self.sampler.current(kind).get(name)

    def pods(self, cluster: str | None = None, *, running: bool = False) -> list[Mapping[str, Any]]:
        out = []
        for pod in self.sampler.current("Pod").values():
            if pod["metadata"].get("deletionTimestamp"):
                continue
            if cluster is not None and (pod["metadata"].get("labels") or {}).get("ray.io/cluster") != cluster:
                continue
            if running and (pod.get("status") or {}).get("phase") != "Running":
                continue
            out.append(pod)
        return out

    def workload(self, kind: str, name: str) -> Mapping[str, Any] | None:
        for wl in self.sampler.current("Workload").values():
            labels = wl["metadata"].get("labels") or {}
            if (
                labels.get("rayquota.io/owner-kind") == kind.lower()
                and labels.get("rayquota.io/owner-name") == name
            ):
                return wl
        return None

    def admitted_gpus(self, kind: str, name: str) -> int | None:
        wl = self.workload(kind, name)
        if wl is None or (condition(dict(wl), "Admitted") or {}).get("status") != "True":
            return None
        assignments = wl["status"]["admission"]["podSetAssignments"]
        return sum(int(ps.get("resourceUsage", {}).get("nvidia.com/gpu", "0")) for ps in assignments)

    def no_pods_of(self, prefix: str) -> bool:
        """No pod of the object (its clusters are named after it) holds anything any more."""
        return not [
            p
            for p in self.sampler.current("Pod").values()
            if p["metadata"]["name"].startswith(f"{prefix}-")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]

    def describe(self) -> str:
        """What the cell's objects looked like last: for a failure's message."""
        parts = []
        kinds = [f.kind for f in self.sampler.feeds]
        for kind in ("RayJob", "RayService", "RayCluster", "JobSet", "Job", "Workload"):
            if kind not in kinds:
                continue
            for name, obj in self.sampler.current(kind).items():
                status = obj.get("status") or {}
                brief = {
                    k: status.get(k)
                    for k in ("jobDeploymentStatus", "reason", "message", "state", "pendingReason")
                }
                conds = {c["type"]: c.get("reason") for c in status.get("conditions") or []}
                parts.append(
                    f"{kind} {name} suspend={(obj.get('spec') or {}).get('suspend')} {brief} {conds}"
                )
        pods = []
        for name, pod in self.sampler.current("Pod").items():
            gone = "-deleting" if pod["metadata"].get("deletionTimestamp") else ""
            pods.append(f"{name}:{(pod.get('status') or {}).get('phase')}{gone}")
        return "; ".join(parts) + f"; pods {pods}"

    # --- the queue's levers ------------------------------------------------------------------

    def set_active(self, kind: str, name: str, active: bool) -> None:
        wl = self.workload(kind, name)
        assert wl is not None, f"{kind} {name} has no Workload"
        self.kube.patch("workloads.rayquota.io", wl["metadata"]["name"], {"spec": {"active": active}})

    def suspend_and_resume(self, kind: str, name: str, running: Callable[[], bool]) -> None:
        """Deactivate the Workload (Kueue's lever): the object stops and its quota is released
        only once its pods are gone; activate it again: it runs again, placed."""
        self.set_active(kind, name, False)
        self.wait(f"{name} evicted and its pods gone", lambda: self.admitted_gpus(kind, name) is None)
        self.wait(f"{name}'s pods gone", lambda: self.no_pods_of(name))
        self.set_active(kind, name, True)
        self.wait(f"{name} admitted again", lambda: self.admitted_gpus(kind, name) is not None)
        self.wait(f"{name} running again", running)


def new_env(cell: Cell, control_plane: Any, operator: Operator, heads: tuple[RayHead, RayHead]) -> Env:
    tag = "".join(c for c in cell.kind.lower() if c.isalnum())[:14]
    namespace = f"{operator.prefix}-m-{tag}-{secrets.token_hex(3)}"
    control_plane.kubectl("create", "namespace", namespace)
    # A fake GPU node of the cell's own: cells side by side never compete for nodes, and a pod
    # on another cell's node would be on the wrong flavor.
    node = NodePool(name=namespace, count=1, cpu="64", memory="512Gi", gpus=8, labels={POOL_LABEL: namespace})
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(node.manifests()[0]))
    quota = Quota(control_plane, namespace)
    flavor = quota.flavor("gpu", namespace)
    preemption = {"preemption": {"withinClusterQueue": "LowerPriority"}}
    cluster_queue = quota.cluster_queue(QUEUE, {flavor: GPUS}, **preemption)
    quota.local_queue(QUEUE, cluster_queue)
    quota.apply("WorkloadPriorityClass", "high", {"value": 1000})
    jobsets = cell.kind == "JobSet"
    sampler = GateSampler(
        str(control_plane.kubeconfig), namespace, cluster_queue, pool_placement(namespace), jobsets=jobsets
    ).start()
    controller = JobSetController(str(control_plane.kubeconfig), namespace).start() if jobsets else None
    class_name = None
    if cell.kind.endswith("Incremental"):
        # No gateway controller runs locally: the operator writes the route weights, nothing
        # routes by them (as in the incremental-upgrade tests).
        class_name = f"rq-{namespace}"[:63]
        body = {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": class_name},
            "spec": {"controllerName": "rayquota.io/test-gateway-controller"},
        }
        control_plane.kubectl("apply", "-f", "-", input=json.dumps(body))
    return Env(
        cell,
        Kube(control_plane, namespace),
        quota,
        sampler,
        operator.dashboard_map,
        heads,
        class_name,
        controller,
    )


def close_env(env: Env, control_plane: Any) -> None:
    env.sampler.close()
    if env.jobset_controller is not None:
        env.jobset_controller.close()
    with _MAP_LOCK:
        Dashboards(env.dashboard_map, env.kube.ns).clear()
    env.quota.delete_all()
    if env.gateway_class is not None:
        control_plane.kubectl("delete", "gatewayclass", env.gateway_class, "--wait=false", check=False)
    control_plane.kubectl("delete", "namespace", env.kube.ns, "--wait=false", check=False)
    control_plane.kubectl("delete", "node", f"{env.kube.ns}-0", "--wait=false", check=False)


def run_cells(cells: list[tuple[Cell, Callable[[], Env]]], scenario: Callable[[Env], None]) -> None:
    """Run each cell's scenario in a thread of its own; every cell's sampler must hold. All
    failures are reported together."""

    def one(make_env: Callable[[], Env]) -> None:
        env = make_env()
        try:
            scenario(env)
            env.sampler.assert_holds()
        except Exception as exc:
            raise AssertionError(f"{exc}\n  state: {env.describe()}") from exc
        finally:
            env.sampler.close()

    failures: list[str] = []
    with ThreadPoolExecutor(max_workers=len(cells)) as pool:
        futures = {pool.submit(one, make_env): cell for cell, make_env in cells}
        for future, cell in futures.items():
            error = future.exception()
            if error is not None:
                failures.append(f"{cell.id}: {type(error).__name__}: {error}")
    assert not failures, "\n\n".join(failures)


# --- the scenarios --------------------------------------------------------------------------


def rayjob_body(name: str, mode: str, suspended: bool, workers: int, **labels: str) -> dict[str, Any]:
    job = gpu_rayjob(name, QUEUE, workers=workers, gpus_per_worker=2, **labels)
    spec = job["spec"]
    spec.update(submissionMode=mode, entrypoint=LONG_ENTRYPOINT, suspend=suspended)
    if mode == "K8sJobMode":
        spec["submitterPodTemplate"] = copy.deepcopy(MANUAL_SUBMITTER)
    if not suspended:
        del spec["suspend"]  # written as most users write it
    return job


def rayjob_running(env: Env, name: str, workers: int) -> Callable[[], bool]:
    def probe() -> bool:
        job = env.obj("RayJob", name) or {}
        cluster = (job.get("status") or {}).get("rayClusterName")
        state = (job.get("status") or {}).get("jobDeploymentStatus")
        if not cluster or state not in ("Running", "Waiting"):
            return False
        if len(env.pods(cluster, running=True)) != 1 + workers:
            return False
        mode = job["spec"].get("submissionMode")
        return mode != "K8sJobMode" or name in env.sampler.current("Job")

    return probe


def rayjob_scenario(env: Env) -> None:
    mode = env.cell.kind.split("/")[1]
    env.route("*", env.heads[0].dashboard_url)
    env.kube.apply(rayjob_body("job", mode, env.cell.suspended, workers=1))
    env.wait("the RayJob running, placed", rayjob_running(env, "job", 1))
    for transition in env.cell.transitions:
        if transition == "suspend-resume":
            env.suspend_and_resume("RayJob", "job", rayjob_running(env, "job", 1))
        elif transition == "preemption":
            urgent = rayjob_body(
                "urgent",
                mode,
                env.cell.suspended,
                workers=2,
                **{"rayquota.io/priority-class": env.quota.name("high")},
            )
            env.kube.apply(urgent)
            env.wait("the preemptor running", rayjob_running(env, "urgent", 2))
            assert env.admitted_gpus("RayJob", "job") is None and env.no_pods_of("job")
            env.kube.kubectl("delete", "rayjob", "urgent", "--wait=false")
            env.wait("the victim running again", rayjob_running(env, "job", 1))
        else:
            raise ValueError(transition)


def raycluster_body(name: str, suspended: bool, workers: int, **labels: str) -> dict[str, Any]:
    spec = gpu_rayjob(name, QUEUE, workers=workers, gpus_per_worker=1)["spec"]["rayClusterSpec"]
    spec["workerGroupSpecs"][0].update(minReplicas=0, maxReplicas=4)
    body = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": QUEUE, **labels}},
        "spec": spec,
    }
    if suspended:
        spec["suspend"] = True
    return body


def pods_running(env: Env, cluster: str, count: int) -> Callable[[], bool]:
    return lambda: len(env.pods(cluster, running=True)) == count


def raycluster_scenario(env: Env) -> None:
    env.kube.apply(raycluster_body("rc", env.cell.suspended, workers=1))
    env.wait("the cluster running", lambda: len(env.pods("rc", running=True)) == 2)
    for transition in env.cell.transitions:
        if transition == "scale-up":  # what the Ray autoscaler does: more replicas
            live = env.obj("RayCluster", "rc")
            assert live is not None
            groups = copy.deepcopy(live["spec"]["workerGroupSpecs"])
            groups[0]["replicas"] = 3
            env.kube.patch("raycluster", "rc", {"spec": {"workerGroupSpecs": groups}})
            env.wait("the grown slice admitted", lambda: env.admitted_gpus("RayCluster", "rc") == 3)
            env.wait("its new workers running", lambda: len(env.pods("rc", running=True)) == 4)
        elif transition == "suspend-resume":
            env.suspend_and_resume("RayCluster", "rc", pods_running(env, "rc", len(env.pods("rc"))))
        elif transition == "preemption":
            high = {"rayquota.io/priority-class": env.quota.name("high")}
            env.kube.apply(raycluster_body("urgent", False, workers=GPUS, **high))
            env.wait("the preemptor running", lambda: len(env.pods("urgent", running=True)) == 1 + GPUS)
            assert env.admitted_gpus("RayCluster", "rc") is None and env.no_pods_of("rc")
            env.kube.kubectl("delete", "raycluster", "urgent", "--wait=false")
            env.wait("the victim running again", lambda: len(env.pods("rc", running=True)) >= 2)
        else:
            raise ValueError(transition)


def job_running(env: Env, name: str, count: int) -> Callable[[], bool]:
    def probe() -> bool:
        pods = env.pods(running=True)
        return len([p for p in pods if (p["metadata"].get("labels") or {}).get(JOB_NAME) == name]) == count

    return probe


def job_scenario(env: Env) -> None:
    """A batch/v1 Job of 2 single-GPU pods; preempted by a RayJob of all the queue's GPUs."""
    body = gpu_job("train", QUEUE, parallelism=2, completions=None, gpus=1, suspend=env.cell.suspended)
    if not env.cell.suspended:
        del body["spec"]["suspend"]  # written as most users write it (the webhook sets it)
    env.kube.apply(body)
    env.wait("the Job running, placed", job_running(env, "train", 2))
    for transition in env.cell.transitions:
        if transition == "suspend-resume":
            env.suspend_and_resume("Job", "train", job_running(env, "train", 2))
        elif transition == "preemption":
            env.route("*", env.heads[0].dashboard_url)
            high = {"rayquota.io/priority-class": env.quota.name("high")}
            env.kube.apply(rayjob_body("urgent", "HTTPMode", True, workers=GPUS // 2, **high))
            env.wait("the preemptor running", rayjob_running(env, "urgent", GPUS // 2))
            assert env.admitted_gpus("Job", "train") is None and env.no_pods_of("train")
            env.kube.kubectl("delete", "rayjob", "urgent", "--wait=false")
            env.wait("the victim running again", job_running(env, "train", 2))
        else:
            raise ValueError(transition)
