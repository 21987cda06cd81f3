"""What the workload reconciler does with admission-check verdicts.

It hands the states recorded on a Workload to the driver (the engine evicts a reservation whose
check says Retry or Rejected) and, while such an eviction runs, makes the verdict durable the
way Kueue does: Retry writes a ``requeueState`` (the workload queues again not before the
latest ``lastTransitionTime + requeueAfterSeconds`` of its Retry checks), Rejected sets the
Workload's ``spec.active`` to false. Each is told by a Warning event on the queued object.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from typing import Any

from rayquota.operator.core import Manager
from rayquota.operator.core.resources import Resource
from rayquota.operator.core.timestamps import format_rfc3339
from rayquota.operator.queue.admission.check_states import recorded_states
from rayquota.operator.queue.admission.driver import Driver, Eviction
from rayquota.operator.queue.workloads.readiness import requeue_state
from rayquota.queueing import CheckState, PreemptionReason

RETRY_EVENT = "AdmissionCheckRetry"
REJECTED_EVENT = "AdmissionCheckRejected"
CHECK_EVICTIONS = frozenset({PreemptionReason.ADMISSION_CHECK, PreemptionReason.ADMISSION_CHECK_REJECTED})


class CheckOutcomes:
    def __init__(self, manager: Manager, workloads: Resource, driver: Driver) -> None:
        self.manager = manager
        self.workloads = workloads
        self.driver = driver

    def feed(self, engine_key: str, workload: Mapping[str, Any]) -> None:
        """The checks' states as recorded: a change to Retry or Rejected evicts in the next cycle."""
        self.driver.check_states(engine_key, recorded_states(workload))

    async def deactivate(
        self, queued_obj: Mapping[str, Any], workload: Mapping[str, Any], eviction: Eviction
    ) -> bool:
        """A check rejected the workload: set ``spec.active`` false (once). True when written."""
        if eviction.kind != PreemptionReason.ADMISSION_CHECK_REJECTED:
            return False
        if not (workload.get("spec") or {}).get("active", True):
            return False
        self.manager.recorder.post(queued_obj, "Warning", REJECTED_EVENT, eviction.reason)
        path = self.workloads.path(str(workload["metadata"]["namespace"]))
        body = {**workload, "spec": {**(workload.get("spec") or {}), "active": False}}
        await self.manager.client.replace(f"{path}/{workload['metadata']['name']}", body)
        return True

    def retry_state(
        self, queued_obj: Mapping[str, Any], workload: Mapping[str, Any], eviction: Eviction
    ) -> dict[str, Any] | None:
        """A check asked for a retry: the new ``requeueState`` (None when no backoff was asked)."""
        if eviction.kind != PreemptionReason.ADMISSION_CHECK:
            return None
        self.manager.recorder.post(queued_obj, "Warning", RETRY_EVENT, eviction.reason)
        retry_at = max(
            (at for state, _, at in recorded_states(workload).values() if state is CheckState.RETRY),
            default=0.0,
        )
        previous = requeue_state(workload)
        if retry_at <= time.time():
            return None
        at = format_rfc3339(dt.datetime.fromtimestamp(retry_at, dt.UTC))
        if previous.get("requeueAt") == at:
            return dict(previous)
        return {"count": int(previous.get("count") or 0) + 1, "requeueAt": at}
