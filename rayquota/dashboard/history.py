"""The History page's data: GPU usage and pending counts per ClusterQueue over the last hours,
in fixed-size rings (a few bytes per queue and sample, never growing), filled from the
dashboard's own snapshots or, when configured, from Prometheus (:mod:`.prometheus_history`)."""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rayquota.dashboard.queue_model import QueueSnapshot

DEFAULT_RESOURCE = "nvidia.com/gpu"
DEFAULT_INTERVAL_S = 15.0
DEFAULT_HOURS = 6.0


@dataclass
class _Series:
    usage: array[float]
    pending: array[float]


@dataclass
class HistoryRing:
    resource: str = DEFAULT_RESOURCE
    interval_s: float = DEFAULT_INTERVAL_S
    hours: float = DEFAULT_HOURS
    _times: array[float] = field(default_factory=lambda: array("d"))
    _series: dict[str, _Series] = field(default_factory=dict)
    _start: int = 0
    """index of the oldest sample once the ring is full"""

    @property
    def capacity(self) -> int:
        return max(2, int(self.hours * 3600 / self.interval_s))

    def __len__(self) -> int:
        return len(self._times)

    def record(self, at: float, usage: Mapping[str, float], pending: Mapping[str, float]) -> None:
        """One sample: per ClusterQueue, usage of the resource (whole units) and pending count
        (NaN: no value, drawn as a gap)."""
        full = len(self._times) >= self.capacity
        slot = self._start if full else len(self._times)
        for name in set(usage) | set(pending):
            if name not in self._series:
                # A queue seen late has no value for earlier samples: NaN draws no line there.
                filler = [float("nan")] * len(self._times)
                self._series[name] = _Series(array("d", filler), array("d", filler))
        if full:
            self._times[slot] = at
            self._start = (self._start + 1) % self.capacity
        else:
            self._times.append(at)
        for name, series in self._series.items():
            values = (float(usage.get(name, 0.0)), float(pending.get(name, 0)))
            if full:
                series.usage[slot], series.pending[slot] = values
            else:
                series.usage.append(values[0])
                series.pending.append(values[1])

    def record_snapshot(self, at: float, snapshot: QueueSnapshot) -> None:
        usage: dict[str, float] = {}
        pending: dict[str, int] = {}
        for name in snapshot.engine.cluster_queue_names():
            status = snapshot.engine.cluster_queue_status(name)
            usage[name] = sum(q for (_, r), q in status.usage.items() if r == self.resource) / 1000
            pending[name] = status.pending
        self.record(at, usage, pending)

    def _ordered(self, values: array[float]) -> list[float]:
        return list(values[self._start :]) + list(values[: self._start])

    def view(self, names: set[str] | None = None, since: float | None = None) -> dict[str, Any]:
        times = self._ordered(self._times)
        first = 0
        if since is not None:
            first = next((i for i, t in enumerate(times) if t >= since), len(times))
        series = []
        for name in sorted(self._series):
            if names is not None and name not in names:
                continue
            data = self._series[name]
            series.append(
                {
                    "clusterQueue": name,
                    "usage": [None if v != v else v for v in self._ordered(data.usage)[first:]],
                    "pending": [None if v != v else int(v) for v in self._ordered(data.pending)[first:]],
                }
            )
        return {
            "resource": self.resource,
            "intervalSeconds": self.interval_s,
            "times": times[first:],
            "series": series,
        }
