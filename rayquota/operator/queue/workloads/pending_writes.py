"""When a pending Workload's status is worth an API write.

The engine's pending sentence carries live numbers ("ClusterQueue a has 3 of 20 free"), so
under load it changes on nearly every cycle for thousands of Workloads. Writing each change
turned every cycle into a storm of status writes that queued ahead of the admissions (Kueue's
baseline: 2-4 writes per pending Workload, admissions waiting behind them). So:

- a Workload the engine has not looked at yet gets no "waiting" write: its cycle's verdict
  (admitted, or a reason) comes next;
- once a pending status is stored, new numbers for the same cause ("has 3 of 20 free" becoming
  "has 2 of 20 free") are written at most once per ``min_interval_s``; a new cause (the queue
  stopped or deleted, another flavor, another workload ahead) and any other change (admitted,
  evicted, requeued, finished) at once: the user must never read a cause that is no longer true;
- a change of words held back is not lost: :meth:`retry_after` says when to look again, so
  the last sentence (a queue stopped or being deleted, say) lands within ``min_interval_s``;
- sentences (a first verdict, new words) share one budget across all Workloads, ``rate_per_s``
  on average and ``burst`` at once. A sentence over budget is given the next free slot and
  written then, unless the Workload was admitted meanwhile. Under a flood, the API server's
  writes go to admissions first (Kueue's baseline: 8,900 sentences for 15,000 Workloads, most
  of them admitted soon after); a few Workloads wait a little longer to be told why.
  Admissions, evictions, requeues and finishes are never held back.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

QUOTA_RESERVED = "QuotaReserved"
RETRY_MARGIN_S = 0.1
# A quantity standing as a word of its own ("8", "36Gi", "500m", "1.5"): the numbers of a
# sentence, as opposed to the digits inside names ("rayjob-first-61347").
_QUANTITY = re.compile(r"(?<![^\s])[0-9]+(?:\.[0-9]+)?[A-Za-z]*(?=[\s,;:)]|$)")


def _is_pending(status: Mapping[str, Any]) -> bool:
    if status.get("admission"):
        return False
    return any(
        c.get("type") == QUOTA_RESERVED and c.get("status") == "False" for c in status.get("conditions") or ()
    )


def cause_of(sentence: str) -> str:
    """The sentence with its quantities blanked: two sentences with one cause differ only there."""
    return _QUANTITY.sub("#", sentence)


def _same_cause(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return cause_of(str(stored.get("pendingReason") or "")) == cause_of(
        str(wanted.get("pendingReason") or "")
    )


def _without_words(status: Mapping[str, Any]) -> dict[str, Any]:
    conditions = [{k: v for k, v in c.items() if k != "message"} for c in status.get("conditions") or ()]
    return {**{k: v for k, v in status.items() if k != "pendingReason"}, "conditions": conditions}


@dataclass
class PendingWrites:
    min_interval_s: float = 30.0
    # 5 a second: at 20, a run of Kueue's baseline slowed down by a loaded machine (640 s instead
    # of 240) wrote a sentence for 8,238 of its 15,000 Workloads before their admission (1.75
    # writes per Workload with the queues' status); sentences over budget wait for their slot
    # and are not written at all if the admission comes first.
    rate_per_s: float = 5.0
    burst: int = 100
    clock: Callable[[], float] = time.monotonic
    _last_write: dict[str, float] = field(default_factory=dict)
    # Keys whose new words were held back, and when they may be written.
    _deferred: dict[str, float] = field(default_factory=dict)
    # The budget, as a virtual schedule: when the next sentence's slot would be if every slot
    # so far had been used back to back; sentences may run up to ``burst`` slots ahead of now.
    _schedule: float = float("-inf")
    # Keys given a slot in the future, and when it comes.
    _slots: dict[str, float] = field(default_factory=dict)

    def should_write(
        self, key: str, stored: Mapping[str, Any] | None, wanted: Mapping[str, Any], *, evaluated: bool
    ) -> bool:
        if not _is_pending(wanted):
            self.forget(key)
            return True
        stored = stored or {}
        if not evaluated and not stored.get("admission"):
            return False
        now = self.clock()
        # A first verdict, or a new cause: written now, within the shared budget.
        sentence = not stored.get("admission") and (
            not _is_pending(stored) or not _same_cause(stored, wanted)
        )
        if (
            _is_pending(stored)
            and _without_words(stored) == _without_words(wanted)
            and _same_cause(stored, wanted)
        ):
            last = self._last_write.get(key)
            if last is not None and now - last < self.min_interval_s:
                if stored != wanted:
                    self._deferred[key] = last + self.min_interval_s
                return False
            sentence = stored != wanted
        if sentence and not self._within_budget(key, now):
            return False
        self._last_write[key] = now
        self._deferred.pop(key, None)
        self._slots.pop(key, None)
        return True

    def _within_budget(self, key: str, now: float) -> bool:
        slot = self._slots.get(key)
        if slot is None:
            spacing = 1.0 / self.rate_per_s
            scheduled = max(self._schedule, now)
            self._schedule = scheduled + spacing
            slot = scheduled - (self.burst - 1) * spacing
            if slot <= now:
                return True
            self._slots[key] = slot
        if slot <= now:
            return True
        self._deferred[key] = slot
        return False

    def retry_after(self, key: str) -> float | None:
        """Seconds until held-back words of ``key`` may be written; None when nothing is held back."""
        due = self._deferred.get(key)
        return None if due is None else max(due - self.clock(), 0.0) + RETRY_MARGIN_S

    def forget(self, key: str) -> None:
        self._last_write.pop(key, None)
        self._deferred.pop(key, None)
        self._slots.pop(key, None)
