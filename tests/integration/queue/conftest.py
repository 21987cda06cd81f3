"""The operator (Ray reconcilers + queue integration) for the queue integration tests, and
per-test quota objects: cluster-scoped ones are named after the test's namespace."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from rayquota.localcluster.nodes import MANUAL_COMPLETION_LABEL
from rayquota.operator.webhook_settings import WebhookSettings
from tests.config_env import operator_config_from_env
from tests.direct_api import apply_as_kubectl
from tests.gate_invariants import FlavorPlacement
from tests.gate_sampler import GateSampler
from tests.integration.ray.kubehelpers import Kube, condition, wait_for
from tests.operator_thread import operator_thread

QUEUE_TEST_NAMESPACE_PREFIX = "q"


@pytest.fixture
def namespace_prefix() -> str:
    return QUEUE_TEST_NAMESPACE_PREFIX


@contextlib.contextmanager
def running_operator(
    namespace_prefix: str = QUEUE_TEST_NAMESPACE_PREFIX,
    env: Mapping[str, str] | None = None,
    *,
    webhooks: bool = False,
) -> Iterator[Path]:
    """The operator in a thread, scoped to ``<namespace_prefix>-*``; yields its dashboard map
    (cluster -> URL of a real Ray head). ``env`` is set only while it starts (its setup reads
    settings once), so operators started by other folders keep theirs. ``webhooks``: it serves
    the admission webhooks on 127.0.0.1 (a free port)."""
    fd, name = tempfile.mkstemp(prefix="rq-dashboards-", suffix=".json")
    os.close(fd)
    dashboard_map = Path(name)
    dashboard_map.write_text("{}")
    previous = {key: os.environ.get(key) for key in env or {}}
    os.environ.update(env or {})
    # The variables are the documented overrides of the configuration's keys, read once here.
    config = dataclasses.replace(
        operator_config_from_env(env or {}),
        version="test-1",
        dashboard_resolver="local",
        dashboard_map_file=str(dashboard_map),
        webhooks=WebhookSettings.loopback() if webhooks else None,
    )
    try:
        with operator_thread(config, [f"{namespace_prefix}-*"]):
            # Its setup has read the settings: put the environment back for other operators.
            _restore(previous)
            yield dashboard_map
    finally:
        _restore(previous)
        dashboard_map.unlink(missing_ok=True)


def _restore(previous: Mapping[str, str | None]) -> None:
    for key, value in previous.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="package")  # stopped when the folder ends: operators share ClusterQueues
def queue_operator(crds_installed: None) -> Iterator[Path]:
    with running_operator() as dashboard_map:
        yield dashboard_map


@pytest.fixture
def kube(control_plane: Any, namespace: str) -> Kube:
    return Kube(control_plane, namespace)


# Where Quota.flavor's pods must run: the pool's nodes, tolerating their GPU taint.
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def pool_placement(pool: str) -> FlavorPlacement:
    return FlavorPlacement({"rayquota.io/gpu-pool": pool}, (GPU_TOLERATION,))


class Quota:
    """Cluster-scoped quota objects for one test, named ``<namespace>-<name>``, deleted after it."""

    api_version = "rayquota.io/v1alpha1"

    def __init__(self, control_plane: Any, namespace: str) -> None:
        self.cp = control_plane
        self.ns = namespace
        self.created: list[tuple[str, str]] = []

    def name(self, short: str) -> str:
        return f"{self.ns}-{short}"

    def apply(self, kind: str, short: str, body: dict[str, Any]) -> str:
        name = self.name(short)
        manifest = {"apiVersion": self.api_version, "kind": kind, "metadata": {"name": name}, **body}
        apply_as_kubectl(self.cp, None, manifest)  # created directly when new
        if (kind, name) not in self.created:
            self.created.append((kind, name))
        return name

    def flavor(self, short: str, pool: str) -> str:
        return self.apply(
            "ResourceFlavor",
            short,
            {
                "spec": {
                    "nodeLabels": {"rayquota.io/gpu-pool": pool},
                    "tolerations": [GPU_TOLERATION],
                }
            },
        )

    def cluster_queue(self, short: str, flavors: dict[str, int], **spec: Any) -> str:
        """GPUs per flavor (cpu and memory plentiful in each)."""
        groups = [
            {
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [
                            {"name": "cpu", "nominalQuota": 256},
                            {"name": "memory", "nominalQuota": "2Ti"},
                            {
                                "name": "nvidia.com/gpu",
                                "nominalQuota": gpus,
                                **spec.pop(f"limits_{flavor}", {}),
                            },
                        ],
                    }
                    for flavor, gpus in flavors.items()
                ],
            }
        ]
        return self.apply("ClusterQueue", short, {"spec": {"resourceGroups": groups, **spec}})

    def a100_team_queue(self, gpus: int) -> str:
        """Flavor ``a100`` and ClusterQueue ``team`` with ``gpus`` GPUs, behind LocalQueue ``team``."""
        cq = self.cluster_queue("team", {self.flavor("a100", "a100"): gpus})
        self.local_queue("team", cq)
        return cq

    def local_queue(self, name: str, cluster_queue: str) -> None:
        import yaml

        manifest = {
            "apiVersion": self.api_version,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"clusterQueue": cluster_queue},
        }
        self.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))

    def delete_all(self) -> None:
        for kind, name in reversed(self.created):
            group = self.api_version.split("/")[0]
            self.cp.kubectl("delete", f"{kind.lower()}.{group}", name, "--wait=false", check=False)


@pytest.fixture
def gate_sampler(control_plane: Any, namespace: str) -> Iterator[Any]:
    """Starts a :class:`GateSampler` on this test's namespace (``start(cluster_queue, pool,
    **options)``, the options :class:`GateSampler`'s own); after the test, the invariants must
    have held at every state it saw."""
    started: list[GateSampler] = []

    def start(cluster_queue: str, pool: str | None = "a100", **options: Any) -> GateSampler:
        placement = pool_placement(pool) if pool is not None else None
        sampler = GateSampler(
            str(control_plane.kubeconfig), namespace, cluster_queue, placement, **options
        ).start()
        started.append(sampler)
        return sampler

    try:
        yield start
        for sampler in started:
            sampler.assert_holds()
    finally:
        for sampler in started:
            sampler.close()


@pytest.fixture
def quota(control_plane: Any, namespace: str) -> Iterator[Quota]:
    q = Quota(control_plane, namespace)
    try:
        yield q
    finally:
        q.delete_all()


def gpu_rayjob(name: str, queue: str, workers: int, gpus_per_worker: int, **labels: str) -> dict[str, Any]:
    """A KubeRay RayJob as a Kueue user writes it: queue label, ``suspend: true``."""
    worker = {
        "name": "ray-worker",
        "image": "rayproject/ray:2.41.0-gpu",
        "resources": {
            "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": str(gpus_per_worker)},
            "limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": str(gpus_per_worker)},
        },
    }
    head = {
        "name": "ray-head",
        "image": "rayproject/ray:2.41.0",
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue, **labels}},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "submissionMode": "HTTPMode",
            "suspend": True,
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [head]}}},
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": workers,
                        "minReplicas": 0,
                        "maxReplicas": 16,
                        "rayStartParams": {},
                        "template": {"spec": {"containers": [worker]}},
                    }
                ],
            },
        },
    }


def held_gpu_pod_template(gpus: int) -> dict[str, Any]:
    """A Job's pod template of one container asking for ``gpus`` GPUs, whose pods run until
    deleted (kwok completes other Jobs' pods a second after they start)."""
    container = {
        "name": "train",
        "image": "busybox",
        "command": ["sleep", "3600"],
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
            "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
        },
    }
    return {
        "metadata": {"labels": {MANUAL_COMPLETION_LABEL: "true"}},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }


def gpu_job(
    name: str, queue: str, *, parallelism: int, completions: int | None, gpus: int, suspend: bool = True
) -> dict[str, Any]:
    """A Job as a Kueue user writes it: the queue label and (without a webhook) ``suspend: true``.
    Its pods run until deleted (kwok completes other Jobs' pods a second after they start)."""
    spec: dict[str, Any] = {
        "parallelism": parallelism,
        "suspend": suspend,
        "backoffLimit": 0,
        "template": held_gpu_pod_template(gpus),
    }
    if completions is not None:
        spec["completions"] = completions
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": spec,
    }


def job_pods(kube: Kube, job: str) -> list[dict[str, Any]]:
    return kube.list("pods", selector=f"batch.kubernetes.io/job-name={job}")


def running_pods(kube: Kube, job: str, count: int) -> list[dict[str, Any]]:
    def ready() -> list[dict[str, Any]] | None:
        pods = [p for p in job_pods(kube, job) if (p.get("status") or {}).get("phase") == "Running"]
        return pods if len(pods) == count else None

    return wait_for(f"{count} running pods of Job {job}", ready, timeout_s=120)


def workload_of(kube: Kube, kind: str, name: str) -> dict[str, Any] | None:
    for wl in kube.list("workloads.rayquota.io"):
        if (
            wl["metadata"]["labels"].get("rayquota.io/owner-kind") == kind.lower()
            and wl["metadata"]["labels"].get("rayquota.io/owner-name") == name
        ):
            return wl
    return None


def cluster_pods(kube: Kube, rayjob: str) -> list[dict[str, Any]]:
    job = kube.get("rayjob", rayjob) or {}
    cluster = (job.get("status") or {}).get("rayClusterName")
    return kube.pods(cluster) if cluster else []


def is_admitted(workload: dict[str, Any] | None) -> bool:
    return (condition(workload, "Admitted") or {}).get("status") == "True"


def admitted_workload(kube: Kube, kind: str, name: str, timeout_s: float = 60) -> dict[str, Any]:
    return wait_for(
        f"{kind} {name}'s Workload admitted",
        lambda: (wl := workload_of(kube, kind, name)) is not None and is_admitted(wl) and wl,
        timeout_s=timeout_s,
    )


def gpus_admitted(workload: dict[str, Any]) -> int:
    return sum(
        int(ps.get("resourceUsage", {}).get("nvidia.com/gpu", "0"))
        for ps in workload["status"]["admission"]["podSetAssignments"]
    )


class OperatorProcess:
    """``rayquota run`` as a process of its own (it can be killed), on ``<prefix>-*`` namespaces.

    Without the admission webhooks unless ``RAYQUOTA_WEBHOOK_PORT`` is given (``"0"``: any port),
    or ``cli_default=True`` leaves the choice to `rayquota run` (on, against the local control
    plane). ``log``: where its output goes (else nowhere)."""

    def __init__(
        self, kubeconfig: str, prefix: str, *, cli_default: bool = False, log: Path | None = None, **env: str
    ) -> None:
        # It may be killed: a killed operator would leave its pending-workloads APIService behind.
        self.env = {**os.environ, "KUBECONFIG": kubeconfig, "RAYQUOTA_VISIBILITY": "false", **env}
        if cli_default:
            self.webhook_flags: list[str] = []
        else:
            self.webhook_flags = ["--webhooks" if "RAYQUOTA_WEBHOOK_PORT" in env else "--no-webhooks"]
        self.prefix = prefix
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rayquota.cli",
                "run",
                "-n",
                f"{self.prefix}-*",
                "--no-leader-elect",
                "--metrics-port",
                "0",
                "--health-port",
                "0",
                *self.webhook_flags,
            ],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("wb") if self.log is not None else subprocess.DEVNULL,
        )

    def interrupt(self) -> int:
        """Ctrl-C, as a user stops it; its exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout=60)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)


@pytest.fixture
def operator_process(control_plane: Any, crds_installed: None) -> Iterator[OperatorProcess]:
    process = OperatorProcess(str(control_plane.kubeconfig))
    try:
        yield process
    finally:
        process.kill()
