"""A clock tests move by hand, for the RayCronJob controller (rayquota/operator/ray/raycronjob/clock.py).

It stands still between moves. While a run it knows of is not yet due it asks to be looked at
again shortly, since the test may move it at any moment: a schedule of every minute is then
tested in seconds, with no real minute waited.
"""

from __future__ import annotations

import datetime as dt
import threading

# How soon a controller waiting on this clock looks again (real seconds).
RECHECK_S = 0.2


class ManualClock:
    def __init__(self, start: dt.datetime) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> dt.datetime:
        with self._lock:
            return self._now

    def set(self, moment: dt.datetime) -> None:
        with self._lock:
            self._now = moment

    def seconds_until(self, moment: dt.datetime) -> float:
        return 0.0 if moment <= self.now() else RECHECK_S
