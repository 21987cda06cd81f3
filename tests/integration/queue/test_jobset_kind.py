"""JobSets under the queue (jobset.x-k8s.io/v1alpha2, Kueue's ``jobset.x-k8s.io/jobset``).

No JobSet controller runs on the local control plane: tests/jobset_controller.py plays it (the
Jobs created as the JobSet reads when seen, suspended and resumed with it, the queue's
placement merged into them on resume); the Kubernetes Job controller makes the pods. The
JobSet CRD (``fixtures/jobset-crd.yaml``, a minimal one: JobSet's controller owns the real one)
is installed with the control plane (tests/conftest.py); an operator that starts before it is
served is tests/unit/operator/test_optional_resource.py's.

Sampled throughout (tests/gate_sampler.py, JobSets watched): no Job of a JobSet unsuspended and
no pod of it while its Workload records no admission, the GPUs of live pods within the
admissions and the ClusterQueue, every pod on the admitted flavor's nodes, and the quota given
on only once the pods that held it are gone. The JobSet written unsuspended without the webhook
is the gate matrix's (test_gate_matrix.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.queue.conftest import Quota, admitted_workload, gpus_admitted, workload_of
from tests.integration.queue.jobsets import gpu_jobset, pods_of
from tests.integration.ray.kubehelpers import Kube, wait_for
from tests.jobset_controller import JOBSET_NAME, JobSetController

GPU_POOL = "rayquota.io/gpu-pool"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def test_a_jobset_is_gated_admitted_onto_the_flavor_and_released_when_its_pods_are_gone(
    queue_operator: Path, kube: Kube, quota: Quota, gate_sampler: Any, control_plane: Any
) -> None:
    cq = quota.a100_team_queue(4)
    sampler = gate_sampler(cq, jobsets=True)

    def running(name: str, count: int) -> list[Any] | None:
        pods = pods_of(sampler.current("Pod").values(), name, running=True)
        return pods if len(pods) == count else None

    with JobSetController(str(control_plane.kubeconfig), kube.ns):
        # A driver and 2 workers of 2 single-GPU pods: 5 pods, 4 GPUs, all the queue has.
        kube.apply(gpu_jobset("first", "team", workers=2, pods_per_worker=2, suspend=True))
        admitted = admitted_workload(kube, "JobSet", "first")
        assert [(ps["name"], ps["count"]) for ps in admitted["spec"]["podSets"]] == [
            ("driver", 1),
            ("workers", 4),
        ]
        assert admitted["status"]["admission"]["clusterQueue"] == cq and gpus_admitted(admitted) == 4
        for pod in wait_for("the first JobSet's 5 pods running", lambda: running("first", 5), timeout_s=120):
            assert pod["spec"]["nodeSelector"][GPU_POOL] == "a100", pod["metadata"]["name"]
            assert TOLERATION in pod["spec"]["tolerations"], pod["metadata"]["name"]
            node = kube.get("node", pod["spec"]["nodeName"])
            assert node is not None and node["metadata"]["labels"][GPU_POOL] == "a100"
        stored = kube.get("jobset", "first")
        assert stored is not None and stored["spec"]["suspend"] is False
        for replicated in stored["spec"]["replicatedJobs"]:
            assert replicated["template"]["spec"]["template"]["spec"]["nodeSelector"][GPU_POOL] == "a100"

        # A second one waits with the reason on its Workload; its Jobs exist, suspended, and it
        # has no pod (sampled: at no state before its admission).
        kube.apply(gpu_jobset("second", "team", workers=2, pods_per_worker=2, suspend=True))
        waiting = wait_for(
            "the second JobSet's pending reason",
            lambda: (
                (wl := workload_of(kube, "JobSet", "second"))
                and (wl.get("status") or {}).get("pendingReason")
                and wl
            ),
        )
        assert "nvidia.com/gpu" in waiting["status"]["pendingReason"]

        def jobs_of_second() -> list[Any] | None:
            found = [j for j in sampler.current("Job").values() if _of(j, "second")]
            return found if len(found) == 3 else None

        jobs = wait_for("the second JobSet's 3 Jobs", jobs_of_second)
        assert all(j["spec"]["suspend"] is True for j in jobs)
        assert not pods_of(sampler.current("Pod").values(), "second")

        # Deleting the first frees its quota only once its pods are gone (its Jobs go with it,
        # by the garbage collector): then the second is admitted and runs, placed.
        kube.kubectl("delete", "jobset", "first", "--wait=false")
        admitted_workload(kube, "JobSet", "second", timeout_s=120)
        wait_for("the second JobSet's 5 pods running", lambda: running("second", 5), timeout_s=120)
    sampler.sync()
    assert sampler.ever("Pod", lambda p: (p["metadata"].get("labels") or {}).get(JOBSET_NAME) == "first")


def _of(job: Any, jobset: str) -> bool:
    return bool((job["metadata"].get("labels") or {}).get(JOBSET_NAME) == jobset)
