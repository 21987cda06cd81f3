"""The admission gate: how many pods a RayCluster may have while it is under quota control.

The queue integration installs its own gate; without one nothing is capped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class AdmittedCaps:
    head: bool  # may the head pod exist
    workers: Mapping[str, int] = field(default_factory=dict)  # worker group -> most pods

    def worker_cap(self, group: str) -> int:
        return int(self.workers.get(group, 0)) if self.head else 0


class AdmissionGate(Protocol):
    def caps_for(self, cluster: Mapping[str, Any]) -> AdmittedCaps | None:
        """None when the cluster is not under quota control."""
        ...


class NoGate:
    def caps_for(self, cluster: Mapping[str, Any]) -> AdmittedCaps | None:
        return None
