"""waitForPodsReady on racks: the rack under an admitted job is tainted (NoExecute, for
maintenance); its pods are evicted by the taint and their replacements, pinned to the rack, never
become ready. After the timeout the job is evicted (PodsReadyTimeout), requeued after its backoff,
and admitted in another rack once one appears. The GPUs of live pods (terminating ones included)
never exceed what the namespace's Workloads are admitted, judged at every state the API server
went through (tests/gate_sampler.py), and no pod runs outside the rack it is pinned to.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.gate_invariants import FlavorPlacement
from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import admitted_workload, workload_of
from tests.integration.ray.kubehelpers import Kube, condition, wait_for
from tests.integration.topology.conftest import POOL, RACK, Racks
from tests.integration.topology.test_racks import assigned_nodes, rack_job, racks_of


def misplaced(pod: Mapping[str, Any], rack_of: Mapping[str, str]) -> bool:
    """A pod bound to a node outside the rack its nodeSelector pins it to."""
    spec = pod.get("spec") or {}
    pinned = (spec.get("nodeSelector") or {}).get(RACK)
    node = spec.get("nodeName")
    return bool(pinned and node and rack_of.get(node) != pinned)


def test_pods_not_ready_in_time_are_evicted_requeued_with_backoff_and_admitted_elsewhere(
    topology_operator: Path, kube: Kube, racks: Racks, control_plane: Any, namespace: str
) -> None:
    first_rack = racks.add("r0", 4)
    cluster_queue = racks.queue(gpus=64)
    toleration = {"key": POOL, "operator": "Equal", "value": namespace, "effect": "NoSchedule"}
    placement = FlavorPlacement({POOL: namespace}, (toleration,))
    with GateSampler(str(control_plane.kubeconfig), namespace, cluster_queue, placement) as sampler:
        kube.apply(rack_job("train", hosts=4))
        admitted = admitted_workload(kube, "RayJob", "train")
        assert racks_of(racks, assigned_nodes(admitted, "gpu")) == {"b0-r0"}
        # Maintenance on the rack: running pods are evicted by the taint, new ones cannot start.
        racks.taint(first_rack, "maintenance", "NoExecute")
        evicted = wait_for(
            "the job evicted for pods not ready in time",
            lambda: (
                (wl := workload_of(kube, "RayJob", "train"))
                and (condition(wl, "Evicted") or {}).get("reason") == "PodsReadyTimeout"
                and wl
            ),
            timeout_s=90,
        )
        state = evicted["status"]["requeueState"]
        assert state["count"] == 1
        waiting = wait_for(
            "the job waiting out its backoff",
            lambda: (
                (wl := workload_of(kube, "RayJob", "train"))
                and (condition(wl, "Requeued") or {}).get("reason") in ("BackoffPending", "BackoffFinished")
                and wl
            ),
            timeout_s=60,
        )
        assert not (waiting.get("status") or {}).get("admission")  # released: its pods are gone
        told = wait_for(
            "the PodsReadyTimeout event on the RayJob",
            lambda: [e for e in kube.events("train") if e["reason"] == "PodsReadyTimeout"],
        )
        assert "its pods were not all ready within 12s" in told[0]["message"]
        assert "requeued in 4s" in told[0]["message"]
        assert any(e["reason"] == "PodNotPlacedInDomain" for e in kube.events("train"))
        # Back in its queue, it waits: the only rack is tainted. A new rack appears.
        wait_for(
            "the requeued job waiting for room",
            lambda: (
                "topology"
                in (
                    ((workload_of(kube, "RayJob", "train") or {}).get("status") or {}).get("pendingReason")
                    or ""
                )
            ),
            timeout_s=60,
        )
        second_rack = racks.add("r1", 4)
        # The judge knows the nodes that existed when it started: tell it of the new rack's.
        sampler.judge.nodes = {**sampler.judge.nodes, **{n: {POOL: namespace} for n in second_rack}}
        again = admitted_workload(kube, "RayJob", "train", timeout_s=60)
        assert racks_of(racks, assigned_nodes(again, "gpu")) == {"b0-r1"}
        wait_for(
            "the job's pods ready in the new rack",
            lambda: (
                (condition(workload_of(kube, "RayJob", "train"), "PodsReady") or {}).get("status") == "True"
            ),
            timeout_s=60,
        )
        # Every state the API server went through: live pods (terminating ones included) never
        # hold more GPUs than the Workloads have admitted, nor more than the quota; every pod
        # on the flavor's nodes.
        sampler.assert_holds()
        assert not sampler.ever("Pod", lambda pod: misplaced(pod, racks.rack_of)), "a pod left its rack"
        assert sampler.ever("Pod", lambda pod: racks.rack_of.get(pod["spec"].get("nodeName", "")) == "b0-r0")
