"""waitForPodsReady: an admitted workload whose pods do not all become ready in time is evicted,
requeued after a backoff, and deactivated after too many tries (Kueue's semantics).

Pure: the settings, the readiness of an admitted slice, the ``PodsReady`` condition and its
deadline, and the backoff. The Workload reconciler applies the verdict.

- Ready means Kubernetes readiness (condition ``Ready=True``, not terminating) of every pod of
  the admitted slice's head and worker pod sets (a submitter pod is not waited for).
- ``timeout`` runs from the admission; once the pods were all ready, a loss of readiness gets
  ``recoveryTimeout`` (default: ``timeout``; 0 disables it) from the moment it was lost.
- A timed-out workload is evicted with reason ``PodsReadyTimeout``; ``requeueState.count`` goes
  up by one and ``requeueState.requeueAt`` is the eviction time plus ``base x 2^(count-1)``
  seconds, capped at ``max`` (no jitter). When ``count`` would exceed ``backoffLimitCount``, the
  workload is deactivated instead (``spec.active: false``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rayquota.operator.core.pods import pod_ready
from rayquota.operator.queue.demand.podsets import SUBMITTER_POD_SET, Demand, GroupOfPod, pods_per_pod_set
from rayquota.queueing import PodSetAssignment, RequeuingTimestamp
from rayquota.queueing.queue_order import EVICTED_BY_PODS_READY_TIMEOUT

PODS_READY = "PodsReady"
PODS_READY_TIMEOUT = EVICTED_BY_PODS_READY_TIMEOUT
DEACTIVATED = "WorkloadRequeuingLimitExceeded"


@dataclass(frozen=True)
class WaitForPodsReady:
    timeout_s: float = 300.0
    recovery_timeout_s: float | None = None
    """None: the same as ``timeout_s``; 0: a loss of readiness is never timed."""
    block_admission: bool = False
    requeuing_timestamp: RequeuingTimestamp = RequeuingTimestamp.EVICTION
    """How a workload evicted here is ordered when it queues again (the engine applies it)."""
    backoff_limit_count: int | None = None
    """None: requeued again and again."""
    backoff_base_s: float = 60.0
    backoff_max_s: float = 3600.0

    @property
    def recovery_s(self) -> float:
        return self.timeout_s if self.recovery_timeout_s is None else self.recovery_timeout_s

    def backoff_s(self, count: int) -> float:
        """The wait before the ``count``-th requeue (count >= 1)."""
        return float(min(self.backoff_base_s * 2 ** max(count - 1, 0), self.backoff_max_s))

    def exceeded(self, count: int) -> bool:
        """Has a workload requeued ``count`` times used up its tries?"""
        return self.backoff_limit_count is not None and count > self.backoff_limit_count


# ---------------------------------------------------------------------- readiness


def ready_pods_per_pod_set(
    demand: Demand, pods_by_part: Mapping[str, Sequence[Mapping[str, Any]]], group_of_pod: GroupOfPod
) -> dict[str, int]:
    """How many ready pods each pod set has, its pods grouped by the kind's ``group_of_pod``."""
    return pods_per_pod_set(demand, pods_by_part, group_of_pod, pod_ready)


def unready(admitted: Sequence[PodSetAssignment], ready: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """The admitted pod sets (head and workers) not all ready: name -> (ready, admitted)."""
    return {
        ps.name: (ready.get(ps.name, 0), ps.count)
        for ps in admitted
        if ps.name != SUBMITTER_POD_SET and ps.count and ready.get(ps.name, 0) < ps.count
    }


# ---------------------------------------------------------------------- the verdict


@dataclass(frozen=True)
class Readiness:
    """What the ``PodsReady`` condition says and until when the workload may stay unready."""

    ready: bool
    reason: str  # PodsReady | WaitForStart | WaitForRecovery
    message: str
    deadline: float | None
    """Seconds since the epoch; None: no deadline (ready, or recovery not timed)."""

    def timed_out(self, now: float) -> bool:
        return self.deadline is not None and now >= self.deadline


def judge(
    config: WaitForPodsReady,
    missing: Mapping[str, tuple[int, int]],
    admitted_at: float,
    previous: Mapping[str, Any] | None,
    previous_since: float | None,
    now: float,
) -> Readiness:
    """``previous``: the Workload's PodsReady condition as written (``previous_since`` its
    lastTransitionTime), to tell a first start from a recovery."""
    if not missing:
        return Readiness(True, "PodsReady", "All pods of the admitted slice are ready", None)
    detail = ", ".join(f"{name} {ready} of {count} ready" for name, (ready, count) in sorted(missing.items()))
    was_ready = previous is not None and previous.get("status") == "True"
    recovering = was_ready or (previous is not None and previous.get("reason") == "WaitForRecovery")
    if recovering:
        since = now if was_ready or previous_since is None else previous_since
        deadline = since + config.recovery_s if config.recovery_s > 0 else None
        return Readiness(False, "WaitForRecovery", f"waiting for pods to be ready again: {detail}", deadline)
    return Readiness(
        False,
        "WaitForStart",
        f"waiting for the admitted pods to be ready: {detail}",
        admitted_at + config.timeout_s,
    )
