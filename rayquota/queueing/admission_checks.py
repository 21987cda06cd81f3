"""Admission checks: conditions outside quota that a workload must pass before it is admitted.

A ClusterQueue lists checks (each for every flavor, or only for some). A workload that fits
the queue's quota *reserves* it (the engine charges the quota, as for any admission) and gets
one state per applicable check, ``Pending`` at first. The check's controller (outside the
engine) moves that state:

- ``Ready`` on every check: the workload is admitted, its pods may start;
- ``Retry``: the reservation is given back (once no pod holds it) and the workload waits in its
  queue again, not before the moment the controller asked for (the backoff);
- ``Rejected``: the workload is deactivated; it leaves its queue until a user reactivates it.

A ClusterQueue naming a check that does not exist, or one that is inactive, admits nothing and
says which check and why. Semantics follow Kueue's AdmissionCheck (v1beta2).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum


class CheckState(StrEnum):
    PENDING = "Pending"
    READY = "Ready"
    RETRY = "Retry"
    REJECTED = "Rejected"


class CheckVerdict(StrEnum):
    """What a workload's check states add up to."""

    WAITING = "Waiting"
    READY = "Ready"
    RETRY = "Retry"
    REJECTED = "Rejected"


CHECK_NOT_FOUND = "AdmissionCheckNotFound"
CHECK_INACTIVE = "AdmissionCheckInactive"
"""The reasons of a ClusterQueue's ``Active=False`` condition (Kueue's words)."""

DEFAULT_BACKOFF_BASE_S = 60
DEFAULT_BACKOFF_MAX_S = 3600
"""Kueue's requeuing backoff defaults: base * 2^(retries-1), capped."""


@dataclass(frozen=True, slots=True)
class AdmissionCheckRule:
    """A check a ClusterQueue requires; with ``on_flavors``, only of workloads given one of them."""

    name: str
    on_flavors: tuple[str, ...] = ()

    def applies_to(self, flavors: Collection[str]) -> bool:
        return not self.on_flavors or any(f in flavors for f in self.on_flavors)


@dataclass(frozen=True, slots=True)
class AdmissionCheck:
    """An AdmissionCheck object: who decides it (``controller_name``) and whether it is usable."""

    name: str
    controller_name: str
    active: bool = True
    message: str = ""
    """Why it is inactive, in the controller's words."""


@dataclass(frozen=True, slots=True)
class CheckProblem:
    """Why a ClusterQueue cannot admit: a check it names is missing or inactive."""

    reason: str
    message: str


def applicable_checks(rules: Iterable[AdmissionCheckRule], flavors: Collection[str]) -> tuple[str, ...]:
    """The names of the checks a workload admitted to ``flavors`` must pass, in the queue's order."""
    return tuple(rule.name for rule in rules if rule.applies_to(flavors))


def check_problems(
    rules: Iterable[AdmissionCheckRule], checks: Mapping[str, AdmissionCheck]
) -> list[tuple[str, str]]:
    """(reason, words) for the first missing check, else the first inactive one."""
    names = [rule.name for rule in rules]
    missing = [n for n in names if n not in checks]
    if missing:
        return [(CHECK_NOT_FOUND, f"AdmissionCheck {missing[0]} not found")]
    for name in names:
        check = checks[name]
        if not check.active:
            detail = f": {check.message}" if check.message else ""
            return [(CHECK_INACTIVE, f"AdmissionCheck {name} is inactive{detail}")]
    return []


def verdict(states: Mapping[str, CheckState]) -> CheckVerdict:
    """Rejected wins over Retry, Retry over waiting; Ready only when every state is Ready."""
    values = set(states.values())
    if CheckState.REJECTED in values:
        return CheckVerdict.REJECTED
    if CheckState.RETRY in values:
        return CheckVerdict.RETRY
    if values <= {CheckState.READY}:
        return CheckVerdict.READY
    return CheckVerdict.WAITING


def describe(states: Mapping[str, CheckState], state: CheckState, messages: Mapping[str, str]) -> str:
    """``AdmissionCheck(s) in <state> state: name (message); ...``, sorted by name."""
    names = sorted(n for n, s in states.items() if s is state)
    noun = "AdmissionChecks" if len(names) > 1 else "AdmissionCheck"
    parts = [f"{n} ({messages[n]})" if messages.get(n) else n for n in names]
    return f"{noun} in {state.value} state: {'; '.join(parts)}"


def retry_backoff_s(
    retry_count: int, base_s: int = DEFAULT_BACKOFF_BASE_S, max_s: int = DEFAULT_BACKOFF_MAX_S
) -> int:
    """Seconds to wait before the ``retry_count``-th retry (1-based): base * 2^(n-1), at most max."""
    if retry_count < 1:
        return 0
    return int(min(max_s, base_s * 2 ** min(retry_count - 1, 62)))
