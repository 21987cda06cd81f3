"""The engine's admission-check events and queries (see :mod:`..admission_checks` for semantics).

:class:`AdmissionCheckEvents` is a component the engine's memory (:class:`~.events.EngineEvents`)
holds and calls, evicting through the drain it is given. A reserved workload keeps its quota
charged (phase ``ADMITTED`` in the engine) while its checks are pending; the engine's
``workload`` tells the two apart with ``WorkloadStatus.checks_ready``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from ..admission_checks import (
    AdmissionCheck,
    AdmissionCheckRule,
    CheckState,
    CheckVerdict,
    applicable_checks,
    describe,
    verdict,
)
from ..decisions import PodSetAssignment, PreemptionReason
from ..quota.accounting import Accounting
from ..quota.state import Phase, WorkloadState

Drain = Callable[[list[WorkloadState], str, PreemptionReason], None]
"""Evicts admitted workloads with a reason and a preemption kind (the engine's ``_drain``)."""


class AdmissionCheckEvents:
    def __init__(self, accounting: Accounting, workloads: Mapping[str, WorkloadState], drain: Drain) -> None:
        self._accounting = accounting
        self._workloads = workloads
        """The engine's workloads by key (its own dict, read here)."""
        self._drain = drain
        self.checks: dict[str, AdmissionCheck] = {}
        self.states: dict[str, dict[str, CheckState]] = {}
        """Per reserved workload: its checks' states (absent: no checks apply)."""

    # ------------------------------------------------------------------ events

    def upsert_admission_check(self, check: AdmissionCheck) -> None:
        """An AdmissionCheck appeared or changed (its ``active`` flag): queues naming it are judged again."""
        if self.checks.get(check.name) == check:
            return
        self.checks[check.name] = check
        self._accounting.unpark_everything()

    def delete_admission_check(self, name: str) -> None:
        if self.checks.pop(name, None) is not None:
            self._accounting.unpark_everything()

    def set_admission_check_state(
        self,
        key: str,
        name: str,
        state: CheckState,
        *,
        message: str = "",
        requeue_at: float = 0.0,
    ) -> None:
        """A check's controller decided. Retry: the reservation is evicted (a ``Preempt`` with kind
        ``AdmissionCheck`` comes out of the next cycle) and after :meth:`release` the workload
        waits until ``requeue_at``. Rejected: the workload is deactivated and evicted likewise.
        States of workloads not reserved, or of checks that do not apply to them, are ignored."""
        wl = self._workloads.get(key)
        states = self.states.get(key)
        if wl is None or states is None or name not in states or wl.phase is not Phase.ADMITTED:
            return
        states[name] = state
        outcome = verdict(states)
        messages = {name: message}
        if outcome is CheckVerdict.REJECTED:
            wl.set_spec(replace(wl.spec, active=False), wl.queued_at)
            reason = f"Deactivated due to {describe(states, CheckState.REJECTED, messages)}"
            self._drain([wl], reason, PreemptionReason.ADMISSION_CHECK_REJECTED)
        elif outcome is CheckVerdict.RETRY:
            wl.set_spec(replace(wl.spec, requeue_at=max(requeue_at, wl.spec.requeue_at)), wl.queued_at)
            reason = f"Evicted due to {describe(states, CheckState.RETRY, messages)}"
            self._drain([wl], reason, PreemptionReason.ADMISSION_CHECK)

    # ----------------------------------------------------------------- queries

    def admission_check_states(self, key: str) -> dict[str, CheckState]:
        """The reserved workload's check states (empty when none apply or it is not reserved)."""
        return dict(self.states.get(key, {}))

    # --------------------------------------------------------------- internals

    def start(
        self,
        wl: WorkloadState,
        rules: tuple[AdmissionCheckRule, ...],
        pod_sets: tuple[PodSetAssignment, ...],
        recorded: Mapping[str, CheckState] | None = None,
    ) -> tuple[str, ...]:
        """At reservation: the checks that apply to the chosen flavors, each Pending (or as
        ``recorded`` when an admission is restored)."""
        flavors = {flavor for ps in pod_sets for flavor in ps.flavors.values()}
        names = applicable_checks(rules, flavors)
        if names:
            self.states[wl.key] = {n: (recorded or {}).get(n, CheckState.PENDING) for n in names}
        else:
            self.states.pop(wl.key, None)
        return names

    def end(self, key: str) -> None:
        self.states.pop(key, None)
