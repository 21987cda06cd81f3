"""The clock the RayCronJob reconciler reads schedules against, injected so tests control time."""

from __future__ import annotations

import datetime as dt
from typing import Protocol


class Clock(Protocol):
    def now(self) -> dt.datetime:
        """The current time, timezone-aware."""
        ...

    def seconds_until(self, moment: dt.datetime) -> float:
        """Real seconds to wait before `moment` may have come (0 when it has)."""
        ...


class SystemClock:
    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def seconds_until(self, moment: dt.datetime) -> float:
        return max(0.0, (moment - self.now()).total_seconds())
