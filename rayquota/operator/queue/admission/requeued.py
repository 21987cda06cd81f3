"""The Workload's ``Requeued`` condition after an eviction, in Kueue's words and steps.

When the evicted workload's quota is given back, Requeued is written with the Evicted
condition's reason (in Kueue's words) and message: True for a preemption or node failures, which
queue again at once; False otherwise. A False one turns True once what held it is over:

- ``PodsReadyTimeout`` / ``AdmissionCheck``: ``BackoffFinished`` once ``requeueState.requeueAt``
  has passed (at once without one) and the workload is active;
- ``Deactivated``: ``Reactivated`` once the workload is active again;
- ``LocalQueueStopped`` / ``ClusterQueueStopped``: ``LocalQueueRestarted`` /
  ``ClusterQueueRestarted`` once that queue runs again.

Any other False reason stays until the workload reserves quota again (the condition is then
removed). The engine never reads this condition: it only tells the user.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from rayquota.api.queueing_v1alpha1 import WorkloadConditionType as Cond
from rayquota.operator.core.timestamps import parse_rfc3339
from rayquota.operator.queue.reporting.kueue_metrics import eviction_words
from rayquota.operator.ray.vocabulary import conditions

# The Evicted reasons (Kueue's words) whose workloads queue again as soon as the quota is back.
REQUEUED_AT_ONCE = frozenset({"Preempted", "NodeFailures"})
BACKOFF_REASONS = frozenset({"PodsReadyTimeout", "AdmissionCheck"})
DEACTIVATED = "Deactivated"
# A stop's reason -> (the queue kind that must run again, the reason once it does).
_RESTARTS = {
    "LocalQueueStopped": ("LocalQueue", "LocalQueueRestarted"),
    "ClusterQueueStopped": ("ClusterQueue", "ClusterQueueRestarted"),
}


def requeue_condition(
    conds: list[dict[str, Any]],
    *,
    requeue_state: Mapping[str, Any],
    active: bool,
    running_queues: Collection[str],
    now: str,
) -> list[dict[str, Any]]:
    """``conds`` of a workload without an admission, with Requeued as Kueue would have it.

    ``requeue_state``: its requeueState; ``active``: its ``spec.active``; ``running_queues``: which
    of its LocalQueue and ClusterQueue exist and are not stopped (``"LocalQueue"``,
    ``"ClusterQueue"``). The result only moves forward (absent -> False -> True), so writing it
    again changes nothing and no two writes undo each other."""
    requeued = conditions.find(conds, Cond.REQUEUED)
    evicted = conditions.find(conds, Cond.EVICTED)
    if requeued is None and evicted is not None and evicted.get("status") == "True":
        # The pods are gone and the quota is back (whoever cleared the admission: this operator,
        # or in Kueue-API mode the job's own runner): told once.
        reason = eviction_words(str(evicted.get("reason") or ""))[0]
        message = str(evicted.get("message") or "")
        conds = conditions.set_condition(
            conds, Cond.REQUEUED, reason in REQUEUED_AT_ONCE, reason, message, now=now
        )
        requeued = conditions.find(conds, Cond.REQUEUED)
    if requeued is None or requeued.get("status") != "False":
        return conds
    # Kueue writes the False and then, in a later pass, the True; when nothing holds the workload
    # both are written at once here: the end state (True, its reason, this time) is the same.
    ended = _hold_ended(str(requeued.get("reason") or ""), requeue_state, active, running_queues, now)
    if ended is None:
        return conds
    return conditions.set_condition(conds, Cond.REQUEUED, True, *ended, now=now)


def _hold_ended(
    reason: str,
    requeue_state: Mapping[str, Any],
    active: bool,
    running_queues: Collection[str],
    now: str,
) -> tuple[str, str] | None:
    """The True reason and message once what a False Requeued ``reason`` waits for is over."""
    if reason in BACKOFF_REASONS:
        if not active:  # Kueue ends a backoff only for an active workload
            return None
        until = parse_rfc3339(requeue_state.get("requeueAt"))
        if until is not None and until > parse_rfc3339(now):  # type: ignore[operator]
            return None
        return "BackoffFinished", "The workload backoff was finished"
    if reason == DEACTIVATED:
        return ("Reactivated", "The workload was reactivated") if active else None
    restart = _RESTARTS.get(reason)
    if restart is not None and restart[0] in running_queues:
        queue, restarted = restart
        return restarted, f"The {queue} was restarted after being stopped"
    return None
