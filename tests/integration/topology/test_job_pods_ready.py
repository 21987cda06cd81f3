"""waitForPodsReady counts a batch/v1 Job's pods (issue #32, point 2): a Job's pods carry no Ray
labels, and readiness once grouped them by the Ray rule, as a worker group the Job does not
have; so no Job pod ever counted as ready, and every Job was evicted after the timeout (12s
here) and requeued, again and again. Here a 2-pod Job's pods are ready, the Workload says so,
the Job outlives the timeout without an eviction and runs to completion."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

from rayquota.operator.core.timestamps import parse_rfc3339
from tests.gate_invariants import FlavorPlacement
from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import admitted_workload, gpu_job, running_pods, workload_of
from tests.integration.ray.kubehelpers import Kube, condition, wait_for
from tests.integration.topology.conftest import POOL, READINESS, Racks
from tests.polling import holds

TIMEOUT_S = float(READINESS["RAYQUOTA_PODS_READY_TIMEOUT"])


def _evicted_for_readiness(workload: Any) -> bool:
    return (condition(workload, "Evicted") or {}).get("reason") == "PodsReadyTimeout"


def _complete(kube: Kube, pod: dict[str, Any]) -> None:
    """What the container's exit makes the kubelet write (the pods opt out of kwok's own)."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    container = pod["spec"]["containers"][0]
    terminated = {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}
    kube.patch_status(
        "pod",
        pod["metadata"]["name"],
        {
            "status": {
                "phase": "Succeeded",
                "conditions": [
                    {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
                ],
                "containerStatuses": [
                    {
                        "name": container["name"],
                        "image": container["image"],
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {"terminated": terminated},
                    }
                ],
            }
        },
    )


def test_a_jobs_ready_pods_count_and_the_job_runs_to_completion_without_eviction(
    topology_operator: Path, kube: Kube, racks: Racks, control_plane: Any, namespace: str
) -> None:
    racks.add("r0", 1)
    cluster_queue = racks.queue(gpus=8)
    toleration = {"key": POOL, "operator": "Equal", "value": namespace, "effect": "NoSchedule"}
    placement = FlavorPlacement({POOL: namespace}, (toleration,))
    with GateSampler(str(control_plane.kubeconfig), namespace, cluster_queue, placement) as sampler:
        kube.apply(gpu_job("train", "team", parallelism=2, completions=2, gpus=1))
        admitted = admitted_workload(kube, "Job", "train")
        pods = running_pods(kube, "train", 2)
        ready = wait_for(
            "the Workload saying the Job's pods are ready",
            lambda: (
                (wl := workload_of(kube, "Job", "train"))
                and (condition(wl, "PodsReady") or {}).get("status") == "True"
                and wl
            ),
            timeout_s=60,
        )
        assert (condition(ready, "PodsReady") or {}).get("reason") == "PodsReady"
        # Past the timeout (counted from the admission): still admitted, never evicted.
        admitted_at = parse_rfc3339((condition(admitted, "Admitted") or {}).get("lastTransitionTime"))
        assert admitted_at is not None
        past_timeout = admitted_at.timestamp() + TIMEOUT_S + 3 - time.time()

        def still_admitted() -> bool:
            wl = workload_of(kube, "Job", "train") or {}
            return bool((wl.get("status") or {}).get("admission")) and not _evicted_for_readiness(wl)

        holds("the Job admitted and not evicted past the timeout", still_admitted, max(past_timeout, 1.0))
        for pod in pods:
            _complete(kube, pod)
        wait_for(
            "the Job complete and its Workload finished",
            lambda: (condition(workload_of(kube, "Job", "train"), "Finished") or {}).get("status") == "True",
            timeout_s=60,
        )
        job = kube.get("job", "train") or {}
        assert any(
            c["type"] == "Complete" and c["status"] == "True"
            for c in (job.get("status") or {}).get("conditions") or []
        ), job.get("status")
        sampler.sync()
        assert not sampler.ever("Workload", _evicted_for_readiness), "the Job was evicted for readiness"
        assert not [e for e in kube.events("train") if e["reason"] == "PodsReadyTimeout"]
        sampler.assert_holds()
