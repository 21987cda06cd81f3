"""The gate failures reported in issue 17, each as a user met it: the operator without admission
webhooks, Ray objects written without ``suspend: true``. The sampler (tests/gate_sampler.py)
checks every state the API server went through: no pod before its admission, every pod on the
flavor's nodes, never more GPUs held than admitted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.queue.conftest import Quota, admitted_workload, cluster_pods, gpu_rayjob
from tests.integration.ray.kubehelpers import Kube, running, wait_for


def warnings_on(kube: Kube, name: str) -> list[str]:
    return [f"{e['reason']}: {e.get('message')}" for e in kube.events(name) if e.get("type") == "Warning"]


def on_pool(kube: Kube, pods: list[dict[str, Any]], pool: str) -> bool:
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in kube.list("nodes")}
    return all(nodes.get(p["spec"].get("nodeName"), {}).get("rayquota.io/gpu-pool") == pool for p in pods)


def test_an_unsuspended_rayjob_runs_its_gpu_worker_on_the_flavor(
    queue_operator: Path, kube: Kube, quota: Quota, gate_sampler: Any
) -> None:
    """Reported: its cluster and pods were created before admission; the GPU worker had no
    toleration and stayed Pending for ever."""
    sampler = gate_sampler(quota.a100_team_queue(8))
    job = gpu_rayjob("train", "team", workers=1, gpus_per_worker=1)
    del job["spec"]["suspend"]  # as most users write it
    kube.apply(job)
    admitted_workload(kube, "RayJob", "train")
    pods = wait_for(
        "the job's head and GPU worker Running",
        lambda: len(p := running(cluster_pods(kube, "train"))) == 2 and p,
        timeout_s=120,
    )
    assert on_pool(kube, pods, "a100")
    sampler.assert_holds()
    assert warnings_on(kube, "train") == []  # nobody cleared a gate: it was gated quietly
