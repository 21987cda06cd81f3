"""waitForPodsReady in the Workload reconciler: the ``PodsReady`` condition of an admitted
Workload, the eviction when its pods are not all ready in time, the requeue backoff and the
deactivation after too many tries, each told by an event on the Ray object.

The verdicts are :mod:`.pods_ready`'s; this applies them. A requeued Workload's place in line is
the engine's rule (:mod:`rayquota.queueing.queue_order`), fed the ``Evicted`` condition's reason
and time by :func:`~rayquota.operator.queue.admission.converter.workload`. With ``blockAdmission`` the engine
admits nothing while an admitted Workload has not yet had all its pods ready.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.operator.core import Manager
from rayquota.operator.core.timestamps import format_rfc3339, parse_rfc3339
from rayquota.operator.queue.admission.admission_loop import AdmissionLoop
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.admission.pods_ready import (
    DEACTIVATED,
    PODS_READY,
    PODS_READY_TIMEOUT,
    Readiness,
    WaitForPodsReady,
    judge,
    ready_pods_per_pod_set,
    unready,
)
from rayquota.operator.queue.demand.podsets import Demand, GroupOfPod
from rayquota.operator.queue.objects import QueueObjects
from rayquota.operator.ray.vocabulary import conditions

Obj = dict[str, Any]


def requeue_state(workload: Mapping[str, Any]) -> Mapping[str, Any]:
    return (workload.get("status") or {}).get("requeueState") or {}


def requeue_at(workload: Mapping[str, Any]) -> float | None:
    moment = parse_rfc3339(requeue_state(workload).get("requeueAt"))
    return moment.timestamp() if moment is not None else None


class ReadinessKeeper:
    def __init__(
        self, manager: Manager, objects: QueueObjects, loop: AdmissionLoop, config: WaitForPodsReady | None
    ) -> None:
        self.manager = manager
        self.objects = objects
        self.loop = loop
        self.config = config
        self._unready: dict[str, str] = {}
        """Admitted Workloads whose pods were never all ready yet (blockAdmission), and why."""
        self._told: dict[str, set[str]] = {}
        """Per Workload, the domains whose unplaced pods were already told (one event budget per object)."""

    @property
    def enabled(self) -> bool:
        return self.config is not None

    def judge(
        self,
        key: str,
        workload: Mapping[str, Any],
        admission: AdmittedSlice,
        demand: Demand,
        pods_by_part: Mapping[str, Sequence[Mapping[str, Any]]],
        group_of_pod: GroupOfPod,
        now: float,
    ) -> Readiness | None:
        """``group_of_pod``: the kind's rule for which pod set a pod belongs to."""
        if self.config is None:
            return None
        ready = ready_pods_per_pod_set(demand, pods_by_part, group_of_pod)
        missing = unready(admission.pod_sets, ready)
        found = conditions.find((workload.get("status") or {}).get("conditions"), PODS_READY)
        admitted = conditions.find((workload.get("status") or {}).get("conditions"), "Admitted")
        admitted_at = _seconds(admitted.get("lastTransitionTime") if admitted else None, now)
        since = _seconds(found.get("lastTransitionTime"), now) if found else None
        verdict = judge(self.config, missing, admitted_at, found, since, now)
        if verdict.reason == "WaitForStart":
            self._hold(key, f"waiting for the pods of {key} to be ready (waitForPodsReady.blockAdmission)")
        else:
            self._release(key)
        return verdict

    def forget(self, key: str) -> None:
        """Not admitted (any more): it blocks nothing."""
        self._release(key)
        self._told.pop(key, None)

    def tell_unplaced(
        self, key: str, obj: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], keys: Sequence[str]
    ) -> None:
        """A Warning event on the Ray object when a pinned pod the scheduler cannot place in its
        domain is seen, once per domain while the workload stays admitted: the pods the planner
        creates again in the same domain (each under a new name) would otherwise spend the
        object's whole event budget and hide the events that follow (PodsReadyTimeout)."""
        told = self._told.setdefault(key, set())
        for pod, words in unplaced_pods(pods, keys):
            selector = (pod.get("spec") or {}).get("nodeSelector") or {}
            domain = ",".join(f"{k}={v}" for k, v in sorted(selector.items()) if k in keys)
            if domain not in told:
                told.add(domain)
                self.manager.recorder.post(obj, "Warning", UNPLACED, words)

    async def time_out(
        self, queued_obj: Mapping[str, Any], workload: Obj, key: str, verdict: Readiness, now: float
    ) -> dict[str, Any] | None:
        """Evict (and requeue with backoff) or deactivate a Workload whose pods were not ready in
        time. Returns the new ``requeueState`` (None when deactivated instead)."""
        assert self.config is not None
        self._release(key)
        count = int(requeue_state(workload).get("count") or 0) + 1
        waited = self.config.timeout_s if verdict.reason == "WaitForStart" else self.config.recovery_s
        why = f"its pods were not all ready within {waited:g}s ({verdict.message.split(': ', 1)[-1]})"
        if self.config.exceeded(count):
            limit = self.config.backoff_limit_count
            self.manager.recorder.post(
                queued_obj,
                "Warning",
                DEACTIVATED,
                f"deactivated: {why}, after {count - 1} requeues "
                f"(waitForPodsReady backoffLimitCount {limit})",
            )
            path = self.objects.api.workloads.path(str(workload["metadata"]["namespace"]))
            body = {**workload, "spec": {**(workload.get("spec") or {}), "active": False}}
            await self.manager.client.replace(f"{path}/{workload['metadata']['name']}", body)
            return None
        delay = self.config.backoff_s(count)
        at = dt.datetime.fromtimestamp(now + delay, dt.UTC)
        self.loop.driver.evict(key, f"evicted: {why}", PODS_READY_TIMEOUT)
        self.loop.request_cycle()
        tries = (
            f" of {self.config.backoff_limit_count + 1}"
            if self.config.backoff_limit_count is not None
            else ""
        )
        self.manager.recorder.post(
            queued_obj,
            "Warning",
            PODS_READY_TIMEOUT,
            f"evicted: {why}; requeued in {delay:g}s, at {format_rfc3339(at)} (attempt {count}{tries})",
        )
        return {"count": count, "requeueAt": format_rfc3339(at)}

    def _hold(self, key: str, reason: str) -> None:
        self._unready[key] = reason
        self._update_hold()

    def _release(self, key: str) -> None:
        if self._unready.pop(key, None) is not None:
            self._update_hold()

    def _update_hold(self) -> None:
        if self.config is None or not self.config.block_admission:
            return
        first = min(self._unready.items(), default=None)
        self.loop.driver.engine.hold_admissions(first[1] if first is not None else None)
        self.loop.request_cycle()


UNPLACED = "PodNotPlacedInDomain"


def unplaced_pods(
    pods: Sequence[Mapping[str, Any]], keys: Sequence[str]
) -> list[tuple[Mapping[str, Any], str]]:
    """Pods pinned to a topology domain (a nodeSelector on one of ``keys``) that the scheduler
    cannot place there, each with its domain and the scheduler's words."""
    out: list[tuple[Mapping[str, Any], str]] = []
    for pod in pods:
        selector = (pod.get("spec") or {}).get("nodeSelector") or {}
        pin = {k: v for k, v in selector.items() if k in keys}
        if not pin or (pod.get("spec") or {}).get("nodeName"):
            continue
        for condition in (pod.get("status") or {}).get("conditions") or ():
            if (
                condition.get("type") == "PodScheduled"
                and condition.get("status") == "False"
                and condition.get("reason") == "Unschedulable"
            ):
                where = ", ".join(f"{k}={v}" for k, v in sorted(pin.items()))
                words = (
                    f"pod {pod['metadata']['name']} cannot be scheduled in its assigned domain {where}: "
                    f"{condition.get('message') or 'unschedulable'}"
                )
                out.append((pod, words))
    return out


def _seconds(timestamp: object, default: float) -> float:
    moment = parse_rfc3339(timestamp)
    return moment.timestamp() if moment is not None else default
