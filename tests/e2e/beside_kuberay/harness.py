"""What the beside-KubeRay tests share besides their fixtures (conftest.py): KubeRay's operator
run as a process, the queued shapes they apply, and the probes they poll on what the gate
sampler watched.

The package's shared stage (:class:`Stage`): one local control plane with KubeRay's CRDs, one
KubeRay v1.6.2 operator and one `rayquota run --no-reconcilers` watching a pool of namespaces
made up front, each test taking fresh ones. KubeRay's operator runs with a hosts file of the
test's (tests/e2e/kuberay_heads.py), so a test can give a cluster a fake Ray dashboard.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rayquota.localcluster import peers
from rayquota.localcluster.cluster import LocalCluster
from rayquota.ports import free_port
from tests.e2e.kuberay_heads import FakeHeads
from tests.e2e.test_chart_install import LocalOperator
from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import Quota, pool_placement
from tests.polling import wait_for

POOL = "a100"
GATE = "rayquota.io/admission"
IMAGE = "rayproject/ray:2.41.0"


@contextmanager
def kuberay_running(
    cluster: LocalCluster,
    namespaces: list[str],
    log: Path,
    wrap: Callable[[list[str]], list[str]] = list,
    extra: tuple[str, ...] = (),
) -> Iterator[Path]:
    """KubeRay's operator watching ``namespaces``, its output in ``log``; ``wrap`` may run the
    command inside something (a mount namespace)."""
    command = peers.kuberay_command(metrics_port=free_port(), health_port=free_port(), namespaces=namespaces)
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            wrap([*command, *extra]),
            env=dict(env, KUBECONFIG=str(cluster.kubeconfig)),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Stage:
    """The package's shared control plane and operators, and its pool of fresh namespaces."""

    cluster: LocalCluster
    heads: FakeHeads
    operator: LocalOperator
    kuberay_log: Path
    pool: list[str] = field(default_factory=list)

    def namespace(self) -> str:
        assert self.pool, "the stage's namespace pool is used up: raise NAMESPACES in conftest.py"
        return self.pool.pop(0)

    def kubectl(self, *args: str, **kwargs: Any) -> Any:
        return self.cluster.kubectl(*args, **kwargs)


class Cell:
    """One namespace of a test: its quota (flavor ``a100``, ClusterQueue ``team`` behind
    LocalQueue ``team``) and a gate sampler watching it throughout."""

    def __init__(self, stage: Stage, gpus: int, **queue_spec: Any) -> None:
        self.stage, self.ns = stage, stage.namespace()
        self.quota = Quota(stage.cluster, self.ns)
        self.flavor = self.quota.flavor("a100", POOL)
        self.queue_spec = queue_spec
        self.cluster_queue = self.quota.cluster_queue("team", {self.flavor: gpus}, **queue_spec)
        self.quota.local_queue("team", self.cluster_queue)
        self.sampler = GateSampler(
            str(stage.cluster.kubeconfig), self.ns, self.cluster_queue, pool_placement(POOL)
        ).start()

    def set_gpus(self, gpus: int) -> None:
        self.quota.cluster_queue("team", {self.flavor: gpus}, **dict(self.queue_spec))

    def apply(self, body: Mapping[str, Any]) -> None:
        self.stage.kubectl("apply", "-f", "-", input=json.dumps({**body}))

    def patch(
        self, kind: str, name: str, patch: list[dict[str, Any]] | dict[str, Any], kind_of: str = "json"
    ) -> Any:
        return self.stage.kubectl(
            "patch", kind, name, "-n", self.ns, "--type", kind_of, "-p", json.dumps(patch), check=False
        )

    def wait(self, what: str, probe: Callable[[], Any], timeout_s: float = 120) -> Any:
        return wait_for(f"{self.ns}: {what}", probe, timeout_s)

    def pods(self, cluster: str) -> list[Mapping[str, Any]]:
        return pods_of(self.sampler, cluster)

    def workload_of(self, kind: str, name: str) -> Mapping[str, Any] | None:
        return workload_of(self.sampler, kind, name)

    def close(self, *objects: tuple[str, str]) -> None:
        self.sampler.close()
        for kind, name in objects:
            self.stage.kubectl("delete", kind, name, "-n", self.ns, "--wait=false", check=False)
        self.quota.delete_all()


# --- shapes -------------------------------------------------------------------------------------


def container(name: str, gpus: int) -> dict[str, Any]:
    limits = {"cpu": "1", "memory": "2Gi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {"name": name, "image": IMAGE, "resources": {"limits": limits, "requests": limits}}


def cluster_spec(gpus_per_worker: int, workers: int, group: str = "gpu") -> dict[str, Any]:
    """A Ray cluster's spec: a CPU head and one GPU worker group."""
    return {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [container("ray-head", 0)]}},
        },
        "workerGroupSpecs": [
            {
                "groupName": group,
                "replicas": workers,
                "minReplicas": 0,
                "maxReplicas": 4,
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-worker", gpus_per_worker)]}},
            }
        ],
    }


def queued(kind: str, namespace: str, name: str, spec: dict[str, Any], **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "team", **labels},
        },
        "spec": spec,
    }


def gpu_service(namespace: str, name: str, workers: int, gpus_per_worker: int) -> dict[str, Any]:
    """A queued NewCluster RayService, written as for KubeRay (no suspend: the webhook sets it).
    Old clusters linger 10 minutes after an upgrade (KubeRay's deletion delay), so the test says
    when quota is freed."""
    spec = {
        "rayClusterDeletionDelaySeconds": 600,
        "upgradeStrategy": {"type": "NewCluster"},
        "rayClusterConfig": cluster_spec(gpus_per_worker, workers),
    }
    return queued("RayService", namespace, name, spec)


# --- probes on what the sampler watched ---------------------------------------------------------


def service_clusters(sampler: GateSampler, service: str) -> dict[str, Mapping[str, Any]]:
    return {
        name: c
        for name, c in sampler.current("RayCluster").items()
        if (c["metadata"].get("labels") or {}).get("ray.io/originated-from-cr-name") == service
    }


def pods_of(sampler: GateSampler, cluster: str) -> list[Mapping[str, Any]]:
    """The cluster's pods not being deleted."""
    return [
        p
        for p in sampler.current("Pod").values()
        if (p["metadata"].get("labels") or {}).get("ray.io/cluster") == cluster
        and not p["metadata"].get("deletionTimestamp")
    ]


def running_on_pool(pods: list[Mapping[str, Any]], count: int) -> bool:
    return len(pods) == count and all(
        (p.get("status") or {}).get("phase") == "Running"
        and (p["spec"].get("nodeSelector") or {}).get("rayquota.io/gpu-pool") == POOL
        for p in pods
    )


def held(pod: Mapping[str, Any]) -> bool:
    gates = {g.get("name") for g in pod["spec"].get("schedulingGates") or ()}
    return GATE in gates and not pod["spec"].get("nodeName")


def workload_of(sampler: GateSampler, kind: str, name: str) -> Mapping[str, Any] | None:
    """The Workload of a queued object (named ``<kind>-<name>-<hash>``)."""
    prefix = f"{kind.lower()}-{name}-"
    return next((w for n, w in sampler.current("Workload").items() if n.startswith(prefix)), None)


def admitted_gpus(workload: Mapping[str, Any] | None) -> int | None:
    """The GPUs the Workload's recorded admission gives (None: not admitted)."""
    status = (workload or {}).get("status") or {}
    admitted = any(
        c.get("type") == "Admitted" and c.get("status") == "True" for c in status.get("conditions") or ()
    )
    admission = status.get("admission")
    if not admitted or not admission:
        return None
    return sum(
        int(str((ps.get("resourceUsage") or {}).get("nvidia.com/gpu", 0)))
        for ps in admission.get("podSetAssignments") or ()
    )


# --- order in the API server's history (the sampler's revisions) -------------------------------


def revisions(
    sampler: GateSampler, kind: str, predicate: Callable[[Mapping[str, Any]], bool], *, deleted: bool
) -> dict[str, list[int]]:
    """uid -> the revisions of the versions of ``kind`` matching ``predicate`` (their deletion
    alone with ``deleted``)."""
    sampler.sync()
    feed = next(f for f in sampler.feeds if f.kind == kind)
    out: dict[str, list[int]] = {}
    for version in sorted(list(feed.versions), key=lambda v: v.revision):
        if version.deleted == deleted and predicate(version.obj):
            out.setdefault(str(version.obj["metadata"].get("uid")), []).append(version.revision)
    return out


def of_cluster(cluster: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda pod: (pod["metadata"].get("labels") or {}).get("ray.io/cluster") == cluster


def first_pod(sampler: GateSampler, cluster: str, since: int = 0) -> int:
    """The revision at which the first pod of ``cluster`` created after ``since`` was stored."""
    created = revisions(sampler, "Pod", of_cluster(cluster), deleted=False)
    firsts = [min(rs) for rs in created.values() if min(rs) > since]
    assert firsts, f"no pod of {cluster} was seen after revision {since}"
    return min(firsts)


def gone_before(sampler: GateSampler, earlier: str, later: str, since: int = 0) -> list[str]:
    """The pods of cluster ``earlier`` that existed when the first pod of cluster ``later``
    (created after revision ``since``) was stored and were not deleted before it (empty: all
    were gone first)."""
    first = first_pod(sampler, later, since)
    deletions = revisions(sampler, "Pod", of_cluster(earlier), deleted=True)
    alive = revisions(sampler, "Pod", of_cluster(earlier), deleted=False)
    return [
        uid
        for uid, rs in alive.items()
        if min(rs) < first and not any(d < first for d in deletions.get(uid, ()))
    ]


def describe(sampler: GateSampler) -> str:
    """The namespace's pods and Workloads, for a failure's message."""
    lines = []
    for name, pod in sorted(sampler.current("Pod").items()):
        gates = ",".join(g.get("name", "") for g in pod["spec"].get("schedulingGates") or ())
        phase = (pod.get("status") or {}).get("phase")
        lines.append(f"  pod {name}: {phase} node={pod['spec'].get('nodeName')} gates=[{gates}]")
    for name, wl in sorted(sampler.current("Workload").items()):
        status = wl.get("status") or {}
        lines.append(f"  workload {name}: gpus={admitted_gpus(wl)} reason={status.get('pendingReason')!r}")
    return "\n".join(lines)


def side_by_side(**scenarios: Callable[[], None]) -> None:
    """Each scenario in a thread of its own (they share the stage's operators); all failures
    are reported together."""
    failures: list[str] = []
    with ThreadPoolExecutor(max_workers=len(scenarios)) as pool:
        futures = {name: pool.submit(run) for name, run in scenarios.items()}
        for name, future in futures.items():
            error = future.exception()
            if error is not None:
                failures.append(f"{name}: {type(error).__name__}: {error}")
    assert not failures, "\n\n".join(failures)


Scenario = tuple["Cell", Callable[["Cell"], None], tuple[tuple[str, str], ...]]
"""A cell, what runs on it, and the objects (kind, name) to delete after."""


def run_cells(cells: Mapping[str, Scenario]) -> None:
    """Each named scenario on its cell, side by side (side_by_side); a failure carries its
    namespace's pods and Workloads (describe). Every cell is closed afterwards, its objects
    deleted."""

    def attached(cell: Cell, scenario: Callable[[Cell], None]) -> Callable[[], None]:
        def one() -> None:
            try:
                scenario(cell)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{describe(cell.sampler)}") from exc

        return one

    try:
        side_by_side(**{name: attached(cell, scenario) for name, (cell, scenario, _) in cells.items()})
    finally:
        for cell, _, objects in cells.values():
            cell.close(*objects)
