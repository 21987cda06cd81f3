"""waitForPodsReady on racks: the rack under an admitted job is tainted (NoExecute, for
maintenance) once its pods are ready; they are evicted by the taint and their replacements,
pinned to the rack, never become ready. After the recovery timeout (the timeout, 12s) the job is
evicted (PodsReadyTimeout), requeued after its backoff, and admitted in another rack once one
appears. The GPUs of live pods (terminating ones included) never exceed what the namespace's
Workloads are admitted, judged at every state the API server went through
(tests/gate_sampler.py), and no pod runs outside the rack it is pinned to.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rayquota.operator.core.timestamps import parse_rfc3339
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


def evicted_for_readiness(workload: Mapping[str, Any]) -> bool:
    return (condition(dict(workload), "Evicted") or {}).get("reason") == "PodsReadyTimeout"


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
        wait_for(
            "the job's pods ready in its rack",
            lambda: (
                (condition(workload_of(kube, "RayJob", "train"), "PodsReady") or {}).get("status") == "True"
            ),
            timeout_s=60,
        )
        # Maintenance on the rack: running pods are evicted by the taint, new ones cannot start.
        racks.taint(first_rack, "maintenance", "NoExecute")
        # Read from every version the API server stored, not by polling: the pods are gone at once
        # (the pinned replacements never started), so the admission beside Evicted=True/
        # PodsReadyTimeout lasts well under a second before the release clears it (Evicted stays
        # true until the next admission); a poll through kubectl (seconds apart under load)
        # missed the evicted version with its requeueState and waited out its 90 s.
        evicted = wait_for(
            "the job evicted for pods not ready in time",
            lambda: sampler.first("Workload", evicted_for_readiness),
            timeout_s=90,
        )
        state = evicted["status"]["requeueState"]
        assert state["count"] == 1
        evicted_at = parse_rfc3339(condition(evicted, "Evicted")["lastTransitionTime"])
        requeue_at = parse_rfc3339(state["requeueAt"])
        assert evicted_at is not None and requeue_at is not None
        # Not before the recovery timeout (12s), counted from the loss of readiness (the times
        # have second precision).
        lost = condition(evicted, "PodsReady") or {}
        lost_at = parse_rfc3339(lost.get("lastTransitionTime"))
        assert lost.get("reason") == "WaitForRecovery" and lost_at is not None, lost
        assert (evicted_at - lost_at).total_seconds() >= 11, (lost_at, evicted_at)
        # Backoff base 4s, attempt 1: requeueAt is 4s after the eviction was decided, which the
        # condition's time (second precision) follows by the time its write took.
        assert 0 < (requeue_at - evicted_at).total_seconds() <= 5
        # Released once its pods are gone; it waits out the backoff (Requeued=False with reason
        # PodsReadyTimeout), unless the pods took longer than the backoff to go, then it is back
        # in its queue at once (BackoffFinished).
        wait_for(
            "the job's quota released and the job requeued",
            lambda: (
                (wl := workload_of(kube, "RayJob", "train"))
                and not (wl.get("status") or {}).get("admission")
                and (condition(wl, "Requeued") or {}).get("reason") in ("PodsReadyTimeout", "BackoffFinished")
            ),
            timeout_s=60,
        )
        told = wait_for(
            "the PodsReadyTimeout event on the RayJob",
            lambda: [e for e in kube.events("train") if e["reason"] == "PodsReadyTimeout"],
        )
        assert "its pods were not all ready within 12s" in told[0]["message"]
        assert "requeued in 4s" in told[0]["message"]
        assert any(e["reason"] == "PodNotPlacedInDomain" for e in kube.events("train"))
        # Back in its queue, it waits: the only rack is tainted. A new rack appears.
        reasons: list[str] = []

        def waiting_for_a_rack() -> str | None:
            wl = workload_of(kube, "RayJob", "train") or {}
            reasons.append(str((wl.get("status") or {}).get("pendingReason") or ""))
            return reasons[-1] if "must share one rack" in reasons[-1] else None

        try:
            wait_for("the requeued job waiting for a rack", waiting_for_a_rack, timeout_s=60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its last pendingReason: {reasons[-1:]}") from exc
        second_rack = racks.add("r1", 4)
        # The judge knows the nodes that existed when it started: tell it of the new rack's.
        sampler.judge.nodes = {**sampler.judge.nodes, **{n: {POOL: namespace} for n in second_rack}}
        again = admitted_workload(kube, "RayJob", "train", timeout_s=60)
        assert racks_of(racks, assigned_nodes(again, "gpu")) == {"b0-r1"}
        readmitted_at = parse_rfc3339(condition(again, "QuotaReserved")["lastTransitionTime"])
        assert readmitted_at is not None and readmitted_at >= requeue_at  # not before its backoff
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
