"""An admitted slice: what a workload may use now, as the driver hands it to the records, the
gate and the writers (its own module: the driver and the rename rule both build on it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rayquota.queueing import FlavorResource, PodSetAssignment


@dataclass(frozen=True)
class AdmittedSlice:
    """What a workload may use now: its ClusterQueue and, per pod set, flavors and pod count."""

    cluster_queue: str
    pod_sets: tuple[PodSetAssignment, ...]
    usage: Mapping[FlavorResource, int]

    def counts(self) -> dict[str, int]:
        return {ps.name: ps.count for ps in self.pod_sets}

    admission_checks: tuple[str, ...] = ()
    """Checks that must all be Ready before its pods may start (the reservation waits for them)."""

    def flavors_of(self, pod_set: str) -> set[str]:
        return {f for ps in self.pod_sets if ps.name == pod_set for f in ps.flavors.values()}
