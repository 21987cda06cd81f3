"""The engine's view of the queues, computed outside the operator from the cached objects.

The dashboard runs in its own process, so it cannot ask the operator's engine. It does what
``rayquota explain`` does, with the same code: a copy of the engine as configured (kept up to
date by the operator's own configuration handlers, see :mod:`.cache`), every admission recorded
in a Workload restored and every demand submitted (``cli_views.load_workloads``), then one
cycle. The queue order, the pending sentences, what is free and who holds it are read off that
copy. Nothing is written anywhere.

A snapshot is rebuilt only when what the engine reads moved, only when a page or the history
sampler asks for one, and not more often than its own cost allows (at most half of the time is
spent rebuilding), so a cache in constant motion costs a bounded share of one core. Workload
conversions and recorded admissions are memoised per resourceVersion.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.dashboard.cache import DashboardCache
from rayquota.operator.core.store import Obj
from rayquota.operator.queue import converter
from rayquota.operator.queue.admission_memo import AdmissionMemo
from rayquota.operator.queue.cli_views import load_workloads
from rayquota.operator.queue.driver import Driver, workload_key_of
from rayquota.operator.queue.workload_status import is_finished
from rayquota.queueing import Admit, Decision, Engine, NodeSnapshot, Workload

MIN_REBUILD_GAP_S = 0.2
REBUILD_SHARE = 0.5
"""At most this share of the time goes to rebuilding snapshots while the cache keeps moving (and
someone watches a page that needs them)."""


class _Silent:
    """The driver's writer for a copy: decisions are read back, never written."""

    def admitted(self, workload: str, admission: Any) -> None:
        pass

    def pending(self, workload: str, reason: str, admitted: bool) -> None:
        pass

    def evict(self, workload: str, reason: str, preemptor: str | None, kind: str) -> None:
        pass


@dataclass(frozen=True)
class PendingEntry:
    """One pending workload (or a scale-up slice of an admitted one) in its queue's order."""

    workload: str
    """``namespace/name`` of the Workload"""
    engine_key: str
    scale_up: bool
    """a slice beyond what is admitted (a RayService upgrade's new cluster, a scale-up)"""
    inadmissible: bool


@dataclass(frozen=True)
class QueueSnapshot:
    version: int
    taken_at: float
    driver: Driver
    decisions: tuple[Decision, ...]
    workloads: Mapping[str, Obj]
    """``namespace/name`` -> the cached Workload (finished ones included)"""
    specs: Mapping[str, Workload]
    admitted_now: frozenset[str] = frozenset()
    """Workloads the copy's cycle admitted: the operator's next cycle will admit them too."""

    @property
    def engine(self) -> Engine:
        return self.driver.engine

    def cluster_queue_names(self) -> list[str]:
        return sorted(self.engine.cluster_queue_names())

    def nodes(self) -> list[NodeSnapshot]:
        return self.engine.snapshot()

    def pending_order(self, cluster_queue: str) -> list[PendingEntry]:
        """Cheap for thousands of entries: the sentences are read per row (:meth:`reason`)."""
        if cluster_queue not in self.engine.cluster_queue_names():
            return []
        out = []
        for engine_key, parked in self.engine.pending_order(cluster_queue):
            key = workload_key_of(engine_key)
            out.append(PendingEntry(key, engine_key, engine_key != key, parked))
        return out

    def reason(self, entry: PendingEntry) -> str:
        status = self.engine.workload(entry.engine_key)
        return status.pending_reason if status is not None else ""

    def reason_of(self, key: str) -> str:
        """The engine's sentence for a workload's pending part (empty when nothing waits)."""
        return self.driver.pending_reason(key) or ""

    def holders(self, cluster_queue: str) -> list[str]:
        """Workloads holding quota in the queue (admitted or being evicted), by key."""
        out = set()
        for engine_key in self.engine.workload_keys():
            status = self.engine.workload(engine_key)
            if status is not None and status.phase != "Pending" and status.cluster_queue == cluster_queue:
                out.add(workload_key_of(engine_key))
        return sorted(out)

    def fits_now(self, key: str) -> bool:
        return key in self.admitted_now


class WorkloadConversions:
    """``converter.workload`` memoised per uid and resourceVersion (and priority classes)."""

    def __init__(self) -> None:
        self._memo: dict[str, tuple[str, int, Workload]] = {}

    def get(self, body: Obj, priority_of: Callable[[str], int | None], priority_version: int) -> Workload:
        meta = body["metadata"]
        uid = _identity(body)
        version = str(meta.get("resourceVersion") or "")
        hit = self._memo.get(uid)
        if hit is not None and hit[0] == version and hit[1] == priority_version:
            return hit[2]
        spec = converter.workload(body, priority_of)
        self._memo[uid] = (version, priority_version, spec)
        return spec

    def keep_only(self, uids: set[str]) -> None:
        for uid in [u for u in self._memo if u not in uids]:
            del self._memo[uid]


class QueueModel:
    def __init__(self, cache: DashboardCache, clock: Callable[[], float] = time.monotonic) -> None:
        self.cache = cache
        self.clock = clock
        self.conversions = WorkloadConversions()
        self.admissions = AdmissionMemo()
        self._snapshot: QueueSnapshot | None = None
        self._next_allowed = 0.0
        self.last_rebuild_s = 0.0

    def snapshot(self) -> QueueSnapshot:
        """The latest snapshot; rebuilt first when the cache moved and the rate bound allows."""
        current = self._snapshot
        if current is not None and (
            current.version == self.cache.queue_version or self.clock() < self._next_allowed
        ):
            return current
        return self._rebuild()

    @property
    def version(self) -> int:
        """The queue version (``cache.queue_version``) the latest snapshot reflects (-1: none)."""
        return self._snapshot.version if self._snapshot is not None else -1

    def behind(self) -> bool:
        """The latest snapshot is older than the cache (the rate bound held a rebuild back)."""
        return self.version != self.cache.queue_version

    def rebuild_due_in(self) -> float:
        """Seconds until a snapshot of the newer cache may be taken (0: now)."""
        return max(0.0, self._next_allowed - self.clock())

    def _rebuild(self) -> QueueSnapshot:
        started = self.clock()
        version = self.cache.queue_version
        loop = self.cache.config
        driver = Driver(copy.deepcopy(loop.driver.engine), _Silent())
        bodies = self.cache.workloads.store.list()
        priority_version = self.cache.priority_version
        specs: dict[str, Workload] = {}
        valid: list[Obj] = []
        for body in bodies:
            # A malformed Workload is left out (the operator reports it); it never fails a page.
            try:
                if not is_finished(body):
                    spec = self.conversions.get(body, loop.priority_of, priority_version)
                    self.admissions.parsed(body)
                    specs[spec.key] = spec
                valid.append(body)
            except (ValueError, KeyError, TypeError):
                continue
        load_workloads(driver, valid, lambda body: specs[_key(body)], self.admissions.parsed)
        decisions = tuple(driver.cycle(time.time()))
        self.conversions.keep_only({_identity(b) for b in valid})
        workloads = {_key(b): b for b in bodies}
        admitted_now = frozenset(workload_key_of(d.workload) for d in decisions if isinstance(d, Admit))
        snapshot = QueueSnapshot(version, time.time(), driver, decisions, workloads, specs, admitted_now)
        self._snapshot = snapshot
        self.last_rebuild_s = self.clock() - started
        self._next_allowed = self.clock() + max(MIN_REBUILD_GAP_S, self.last_rebuild_s / REBUILD_SHARE)
        return snapshot


def _key(body: Mapping[str, Any]) -> str:
    return f"{body['metadata']['namespace']}/{body['metadata']['name']}"


def _identity(body: Mapping[str, Any]) -> str:
    return str(body["metadata"].get("uid") or _key(body))
