"""A Workload's recorded admission, parsed once per version of the Workload.

The gate (asked on every event of every queued cluster) and the queue status writer (a pass
over every Workload every STATUS_PERIOD_S) read the same admissions again and again; parsing
their quantities each time was a tenth of the operator's time under a flood of RayJobs. A
Workload's admission changes only with its resourceVersion, so the memo is exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.core.memo import BoundedMemo
from rayquota.operator.queue.admission import converter
from rayquota.queueing import PodSetAssignment

Parsed = tuple[str, tuple[PodSetAssignment, ...]]  # (ClusterQueue, pod set assignments)
# Versions remembered; the oldest are dropped beyond this many.
MEMO_SIZE = 20_000


class AdmissionMemo:
    def __init__(self, size: int = MEMO_SIZE) -> None:
        self._parsed: BoundedMemo[tuple[object, object], Parsed | None] = BoundedMemo(size)

    def __len__(self) -> int:
        return len(self._parsed)

    def parsed(self, workload: Mapping[str, Any]) -> Parsed | None:
        """``converter.admission_from_api`` of the Workload's ``status.admission``; None without one."""
        meta = workload["metadata"]
        version = (meta.get("uid"), meta.get("resourceVersion"))
        if version[0] is None or version[1] is None:
            return _parse(workload)
        return self._parsed.get(version, lambda: _parse(workload))


def _parse(workload: Mapping[str, Any]) -> Parsed | None:
    admission = (workload.get("status") or {}).get("admission")
    return converter.admission_from_api(admission) if admission else None
