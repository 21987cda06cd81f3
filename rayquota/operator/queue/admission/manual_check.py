"""The built-in admission-check controller ``rayquota.io/manual``: a person (or a test) decides.

- Every AdmissionCheck whose ``spec.controllerName`` is ``rayquota.io/manual`` is marked
  ``Active`` (this controller is running).
- A Workload that reserved quota carries one Pending entry per check in
  ``status.admissionChecks``. The annotation ``admission.rayquota.io/<check name>`` on the
  Workload, with the value ``Ready``, ``Retry`` or ``Rejected``, moves that entry to the state:
  ``kubectl annotate workload <name> admission.rayquota.io/approval=Ready``.
- A ``Retry`` annotation is consumed (removed once applied), so the next reservation waits for
  a decision again; its backoff is Kueue's (60 s doubling per retry, at most an hour), written
  as the entry's ``requeueAfterSeconds``. ``Ready`` stays: the workload is approved for good.
- Only a Workload that holds its reservation (``status.admission``, no eviction under way) is
  decided, as Kueue's check controllers decide only reserved workloads. Once the reservation
  is given back the workload reconciler sets every entry Pending again (``check_states``):
  deciding then would undo that write and be undone by the next, for ever (a ``Ready``
  annotation, which stays). The annotation waits for the next reservation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.api.admission_check_v1alpha1 import MANUAL_CONTROLLER
from rayquota.operator.core import Informer, Manager, ObjectKey, Result
from rayquota.operator.core.timestamps import now_rfc3339
from rayquota.operator.queue.admission.workload_status import is_evicted
from rayquota.operator.queue.kueue.api_group import QueueApi
from rayquota.operator.ray.vocabulary import conditions
from rayquota.queueing import CheckState, retry_backoff_s

STATE_ANNOTATION_PREFIX = "admission.rayquota.io/"
DECISIONS = frozenset({CheckState.READY, CheckState.RETRY, CheckState.REJECTED})


def decided_entries(
    workload: Mapping[str, Any], manual_checks: set[str], now: str
) -> tuple[list[dict[str, Any]], list[str]] | None:
    """The new ``status.admissionChecks`` when an annotation decides a Pending manual check of a
    reserved Workload, and the annotations to consume (also a Retry already applied whose
    removal did not land); None when there is nothing to do."""
    status = workload.get("status") or {}
    if not status.get("admission") or is_evicted(workload):
        return None
    annotations = (workload.get("metadata") or {}).get("annotations") or {}
    entries = [dict(e) for e in status.get("admissionChecks") or []]
    consumed: list[str] = []
    for entry in entries:
        name = str(entry.get("name"))
        key = STATE_ANNOTATION_PREFIX + name
        wanted = annotations.get(key)
        if name not in manual_checks or wanted not in DECISIONS:
            continue
        if entry.get("state") == CheckState.RETRY == wanted:
            consumed.append(key)
            continue
        if entry.get("state") != CheckState.PENDING:
            continue
        entry.update(state=wanted, lastTransitionTime=now, message=f"set by the annotation {key}")
        if wanted == CheckState.RETRY:
            retries = int(entry.get("retryCount") or 0) + 1
            entry.update(retryCount=retries, requeueAfterSeconds=retry_backoff_s(retries))
            consumed.append(key)
        else:
            entry.pop("requeueAfterSeconds", None)
    changed = entries != list(status.get("admissionChecks") or [])
    return (entries, consumed) if changed or consumed else None


class ManualChecks:
    def __init__(self, manager: Manager, api: QueueApi, checks: Informer, workloads: Informer) -> None:
        self.manager = manager
        self.api = api
        self.checks = checks
        self.workloads = workloads

    def register(self) -> None:
        self.manager.controller("manual-admission-check", self.reconcile_check, workers=1).watch(self.checks)
        states = self.manager.controller("manual-admission-check-states", self.reconcile_workload, workers=1)
        states.watch(self.workloads)

    def manual_checks(self) -> set[str]:
        return {
            str(c["metadata"]["name"])
            for c in self.checks.store.list()
            if (c.get("spec") or {}).get("controllerName") == MANUAL_CONTROLLER
        }

    async def reconcile_check(self, key: ObjectKey) -> Result | None:
        check = self.checks.store.get("", key.name)
        if check is None or (check.get("spec") or {}).get("controllerName") != MANUAL_CONTROLLER:
            return None
        previous = dict(check.get("status") or {})
        conds = conditions.set_condition(
            list(previous.get("conditions") or []),
            "Active",
            True,
            "Active",
            f"{MANUAL_CONTROLLER}: a workload's state is set by its annotation "
            f"{STATE_ANNOTATION_PREFIX}{key.name}",
            now=now_rfc3339(),
        )
        await self.manager.status.write(self.api.admission_checks, check, {**previous, "conditions": conds})
        return None

    async def reconcile_workload(self, key: ObjectKey) -> Result | None:
        workload = self.workloads.store.get_key(key)
        if workload is None:
            return None
        decided = decided_entries(workload, self.manual_checks(), now_rfc3339())
        if decided is None:
            return None
        entries, consumed = decided
        status = {**(workload.get("status") or {}), "admissionChecks": entries}
        stored = await self.manager.status.write(self.api.workloads, workload, status)
        if stored is not None and consumed:
            # A merge patch, not a PUT of the cached object: the workload reconciler writes the
            # eviction this decision causes meanwhile, and a 409 here would leave the annotation
            # to decide the next reservation too.
            meta = stored["metadata"]
            path = self.api.workloads.path(str(meta["namespace"]), str(meta["name"]))
            patch = {"metadata": {"annotations": dict.fromkeys(consumed)}}
            await self.manager.client.merge_patch(path, patch)
        return None
