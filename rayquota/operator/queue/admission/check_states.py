"""A Workload's ``status.admissionChecks``: read it, and say what it should be. Pure.

Each entry is ``{name, state, lastTransitionTime, message, ...}`` (Kueue's shape). The workload
reconciler writes the list at reservation (every applicable check Pending), the checks'
controllers move the states, and the gate opens only when every state is Ready.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.operator.core.timestamps import parse_rfc3339
from rayquota.queueing import CheckState

UNSATISFIED_CHECKS = "UnsatisfiedAdmissionChecks"
"""The Admitted condition's reason while quota is reserved and a check is not Ready (Kueue's)."""


def _entries(workload_status: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return list((workload_status or {}).get("admissionChecks") or [])


def recorded_states(workload: Mapping[str, Any]) -> dict[str, tuple[CheckState, str, float]]:
    """Per check: (state, message, requeue_at), requeue_at being lastTransitionTime plus the
    check's ``requeueAfterSeconds`` (0 when it asks for none). Unknown states are skipped."""
    out: dict[str, tuple[CheckState, str, float]] = {}
    for entry in _entries(workload.get("status")):
        try:
            state = CheckState(str(entry.get("state")))
        except ValueError:
            continue
        after = entry.get("requeueAfterSeconds")
        since = parse_rfc3339(entry.get("lastTransitionTime"))
        requeue_at = since.timestamp() + float(after) if after and since is not None else 0.0
        out[str(entry["name"])] = (state, str(entry.get("message") or ""), requeue_at)
    return out


def restored_states(workload: Mapping[str, Any]) -> dict[str, CheckState]:
    """The check states an engine rebuilt at start-up holds for a recorded reservation. A
    verdict (Retry, Rejected) on a reservation whose eviction is not recorded yet was never
    acted on (a check controller wrote it while no operator ran, or just before a restart):
    it is restored Pending, so the Workload's first reconcile feeds it like any new verdict
    and the reservation is evicted. Held as recorded, it would read as already seen, and the
    reservation would keep its quota for good."""
    undecided = (CheckState.RETRY, CheckState.REJECTED)
    return {
        name: CheckState.PENDING if state in undecided else state
        for name, (state, _, _) in recorded_states(workload).items()
    }


def all_ready(workload: Mapping[str, Any]) -> bool:
    """No check, or every check Ready: a recorded admission lets pods start."""
    return status_ready(workload.get("status"))


def status_ready(workload_status: Mapping[str, Any] | None) -> bool:
    """:func:`all_ready` of a Workload's status."""
    return all(entry.get("state") == CheckState.READY for entry in _entries(workload_status))


def passed(workload_status: Mapping[str, Any] | None) -> bool:
    """Checks were recorded and every one is Ready."""
    return bool(_entries(workload_status)) and status_ready(workload_status)


def reserved_checks(
    previous: Mapping[str, Any] | None, names: Sequence[str], now: str
) -> list[dict[str, Any]]:
    """The list while quota is reserved: the applicable checks, each keeping its recorded state,
    new ones Pending."""
    recorded = {str(e["name"]): e for e in _entries(previous)}
    out = []
    for name in names:
        entry = recorded.get(name)
        out.append(
            dict(entry)
            if entry is not None
            else {"name": name, "state": CheckState.PENDING.value, "lastTransitionTime": now, "message": ""}
        )
    return out


def requeued_checks(previous: Mapping[str, Any] | None, now: str) -> list[dict[str, Any]]:
    """The list once the reservation is given back: every check Pending again (Ready included,
    as Kueue resets them), retry counts kept; a Rejected one stays as the reason it left."""
    out = []
    for entry in _entries(previous):
        if entry.get("state") in (CheckState.PENDING, CheckState.REJECTED):
            out.append(dict(entry))
            continue
        reset = {k: v for k, v in entry.items() if k not in ("requeueAfterSeconds", "podSetUpdates")}
        out.append(reset | {"state": CheckState.PENDING.value, "lastTransitionTime": now, "message": ""})
    return out


def not_ready_words(workload_status: Mapping[str, Any] | None) -> str:
    """``waiting for AdmissionCheck(s) a, b`` (those not Ready)."""
    waiting = sorted(str(e["name"]) for e in _entries(workload_status) if e.get("state") != CheckState.READY)
    noun = "AdmissionChecks" if len(waiting) > 1 else "AdmissionCheck"
    return f"waiting for {noun} {', '.join(waiting)}"
