"""The History page from Prometheus, when its URL is configured: the operator's own gauges
(``rayquota_cluster_queue_resource_usage`` for the charted resource, ``rayquota_pending_workloads``)
read with ``query_range`` into the same ring the in-process sampler fills.

The whole window is read once (in pieces Prometheus accepts), then every interval only the
steps after the last one read. Each step is a sample: a ClusterQueue without a value there is a
gap, not a zero. Only the leader sets the gauges, but a replica that led before may still have
series in the window, so each is taken at most once per label set (``max``) before summing
flavors or statuses. A failing Prometheus leaves the ring as it was and says why
(:attr:`PrometheusHistory.error`); the next interval tries again.

aiohttp's client (the server's own library) speaks the HTTP API; the API's JSON is small
enough to parse here (``status``, ``data.resultType == "matrix"``, ``result[].metric`` and
``values`` of ``[unix seconds, "value"]``).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from rayquota.dashboard.history import HistoryRing

log = logging.getLogger(__name__)

USAGE_METRIC = "rayquota_cluster_queue_resource_usage"
PENDING_METRIC = "rayquota_pending_workloads"
MAX_POINTS = 10_000
"""Steps per query_range request (Prometheus refuses more than 11,000 points per series)."""
TIMEOUT_S = 10.0


class PrometheusError(Exception):
    pass


def usage_query(resource: str) -> str:
    selector = f"{USAGE_METRIC}{{resource={_quoted(resource)}}}"
    return f"sum by (cluster_queue) (max by (cluster_queue, flavor) ({selector}))"


def pending_query() -> str:
    return f"sum by (cluster_queue) (max by (cluster_queue, status) ({PENDING_METRIC}))"


def _quoted(value: str) -> str:
    return json.dumps(value)  # a PromQL string literal: double quotes, backslash escapes


def parse_matrix(answer: Mapping[str, Any]) -> dict[str, dict[float, float]]:
    """``cluster_queue`` -> {step time: value} from a query_range answer; errors named."""
    if answer.get("status") != "success":
        kind = answer.get("errorType") or "error"
        raise PrometheusError(f"{kind}: {answer.get('error') or 'no reason given'}")
    data = answer.get("data") or {}
    if data.get("resultType") != "matrix":
        raise PrometheusError(f"expected a matrix, got resultType {data.get('resultType')!r}")
    out: dict[str, dict[float, float]] = {}
    for series in data.get("result") or []:
        name = (series.get("metric") or {}).get("cluster_queue")
        if not name:
            continue
        points = out.setdefault(str(name), {})
        for stamp, value in series.get("values") or []:
            points[round(float(stamp), 3)] = float(value)
    return out


@dataclass
class PrometheusHistory:
    url: str
    ring: HistoryRing
    clock: Callable[[], float] = time.time
    error: str | None = None
    """Why the last read failed (None: it worked)."""
    _last: float | None = None
    """The last step read (unix seconds)."""
    _names: set[str] = field(default_factory=set)

    @property
    def step_s(self) -> float:
        return self.ring.interval_s

    async def refresh(self, session: aiohttp.ClientSession) -> int:
        """Read the steps since the last one read (the whole window the first time) into the ring;
        returns the number of samples added. On failure the ring is left as it was."""
        step = self.step_s
        now = round(self.clock(), 3)
        start = now - (self.ring.capacity - 1) * step if self._last is None else self._last + step
        # The steps are start + k * step up to now (Prometheus evaluates at exactly those times).
        end = start + math.floor(round((now - start) / step, 6)) * step
        added = 0
        try:
            while start <= end:
                chunk_end = min(end, start + (MAX_POINTS - 1) * step)
                usage = await self._query(session, usage_query(self.ring.resource), start, chunk_end)
                pending = await self._query(session, pending_query(), start, chunk_end)
                added += self._record(start, chunk_end, usage, pending)
                self._last = chunk_end
                start = chunk_end + step
        except (aiohttp.ClientError, TimeoutError, PrometheusError, ValueError) as exc:
            message = f"Prometheus at {self.url}: {exc or type(exc).__name__}"
            if message != self.error:
                log.warning("History: %s", message)
            self.error = message
            return added
        self.error = None
        return added

    async def _query(
        self, session: aiohttp.ClientSession, query: str, start: float, end: float
    ) -> dict[str, dict[float, float]]:
        params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{self.step_s:g}"}
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
        async with session.get(f"{self.url}/api/v1/query_range", params=params, timeout=timeout) as response:
            try:
                answer = await response.json(content_type=None)
            except (json.JSONDecodeError, aiohttp.ContentTypeError) as exc:
                raise PrometheusError(f"HTTP {response.status}, not the HTTP API's JSON") from exc
        if not isinstance(answer, dict):
            raise PrometheusError(f"HTTP {response.status}, not the HTTP API's JSON")
        return parse_matrix(answer)

    def _record(
        self,
        start: float,
        end: float,
        usage: dict[str, dict[float, float]],
        pending: dict[str, dict[float, float]],
    ) -> int:
        self._names |= set(usage) | set(pending)
        count = 0
        steps = round((end - start) / self.step_s) + 1
        for index in range(steps):
            at = round(start + index * self.step_s, 3)
            self.ring.record(
                at,
                {name: usage.get(name, {}).get(at, math.nan) for name in self._names},
                {name: pending.get(name, {}).get(at, math.nan) for name in self._names},
            )
            count += 1
        return count
