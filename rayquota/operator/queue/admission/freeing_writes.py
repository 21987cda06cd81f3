"""Status writes that free quota, which the admission cycles wait for.

Quota given back in the engine before the Workload's status says so (a scale-down's smaller
admission, a job that finished with its pods already gone) must go to no one until that status
is stored: otherwise a waiting workload's admission can be written first, and the Workloads in
the API server add up to more than the quota. So the cycles wait for every such write, however
long it takes; there is no time limit after which the quota is given on anyway.

That cannot wait for ever on its own: the write is made by the Workload's reconcile, which is
retried with backoff while it fails, and a Workload deleted meanwhile ends the wait (the
reconciler calls :meth:`FreeingWrites.release` for both). While the cycles wait, the
``rayquota_admission_cycles_waiting_for_writes`` gauge counts the writes awaited, and a warning
names the oldest every ``warn_every_s``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from rayquota.operator.queue.reporting import metrics

log = logging.getLogger(__name__)

WARN_EVERY_S = 10.0


@dataclass
class FreeingWrites:
    clock: Callable[[], float]
    warn_every_s: float = WARN_EVERY_S
    _since: dict[str, float] = field(default_factory=dict)
    """Workload (namespace/name) -> when the cycles began to wait for its freeing write."""
    _next_warning: float | None = None

    def hold(self, workload: str) -> None:
        if workload not in self._since:
            self._since[workload] = self.clock()
            log.debug("admission cycles wait for Workload %s's status write (it frees quota)", workload)
        if self._next_warning is None:
            self._next_warning = self.clock() + self.warn_every_s
        metrics.CYCLES_WAITING_FOR_WRITES.set(len(self._since))

    def release(self, workload: str) -> bool:
        """True when the cycles were waiting for this Workload's write."""
        if self._since.pop(workload, None) is None:
            return False
        if not self._since:
            self._next_warning = None
        metrics.CYCLES_WAITING_FOR_WRITES.set(len(self._since))
        return True

    def awaited(self) -> dict[str, float]:
        """The writes awaited: Workload -> seconds waited so far."""
        now = self.clock()
        return {workload: now - since for workload, since in self._since.items()}

    def waiting(self) -> bool:
        """Must the next cycle wait? Says so in a warning once the wait grows long."""
        if not self._since:
            return False
        now = self.clock()
        if self._next_warning is not None and now >= self._next_warning:
            oldest = min(self._since, key=self._since.__getitem__)
            log.warning(
                "admission cycles wait for %d Workload status write(s) that free quota; the oldest, "
                "Workload %s, unwritten for %.0fs (the freed quota is given on once it is stored)",
                len(self._since),
                oldest,
                now - self._since[oldest],
            )
            self._next_warning = now + self.warn_every_s
        return True

    def seconds_to_next_warning(self) -> float | None:
        if self._next_warning is None:
            return None
        return max(0.0, self._next_warning - self.clock())
