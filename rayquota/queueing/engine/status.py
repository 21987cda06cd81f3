"""What the engine tells of one workload (:meth:`~.events.EngineEvents.workload`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..admission_checks import CheckState
from ..decisions import PodSetAssignment
from ..model import FlavorResource
from ..quota.state import Phase


@dataclass(frozen=True, slots=True)
class WorkloadStatus:
    key: str
    phase: Phase
    cluster_queue: str | None
    pending_reason: str
    usage: Mapping[FlavorResource, int]
    pod_sets: tuple[PodSetAssignment, ...]
    admitted_at: float | None
    """The ``now`` of the cycle that admitted it (``None`` while pending)."""
    admission_checks: Mapping[str, CheckState] = field(default_factory=dict)
    """The states of the checks its reservation must pass (empty when none apply)."""

    @property
    def checks_ready(self) -> bool:
        """Quota reserved and every check Ready: the workload is admitted, its pods may start."""
        return self.phase is Phase.ADMITTED and all(
            s is CheckState.READY for s in self.admission_checks.values()
        )
