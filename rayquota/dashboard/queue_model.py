"""The engine's view of the queues, computed outside the operator from the cached objects.

The dashboard runs in its own process, so it cannot ask the operator's engine. It keeps a copy:
an engine configured by the operator's own configuration handlers (:mod:`.cache`), into which
every Workload is loaded as the operator's start-up and ``rayquota explain`` load them (recorded
admissions restored, demands submitted: ``cli_views.load_workloads``), then one cycle is run. The
queue order, the pending sentences, what is free and who holds it are read off that copy.
Nothing is written anywhere.

The copy stays loaded between snapshots: a refresh applies only the Workloads that changed since
the last one, through the driver's own calls (``submit`` for a new demand, ``remove`` and a load
again when the recorded admission moved), plus the few the copy's last cycle admitted or evicted
(those decisions were the copy's own guess at what the operator will do, not facts yet: they are
undone by loading those Workloads again from their objects). Before each cycle every parked
workload is woken, so each group of look-alikes is judged again and every sentence is current.
So a snapshot costs what changed plus one judgement per group of look-alikes, not the size of
the cache.

A snapshot is refreshed only when what the engine reads moved, only when a page or the history
sampler asks for one, and not more often than its own cost allows (at most half of the time is
spent refreshing). Workload conversions and recorded admissions are memoised per resourceVersion.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.cli_views import load_workloads
from rayquota.dashboard.cache import DashboardCache
from rayquota.operator.core.cache.store import Obj, Store
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.admission.admission_memo import AdmissionMemo, Parsed
from rayquota.operator.queue.admission.driver import Driver, workload_key_of
from rayquota.operator.queue.admission.workload_status import is_evicted, is_finished
from rayquota.operator.queue.demand.pod_set_words import reason_in_words
from rayquota.queueing import Admit, Decision, Engine, NodeSnapshot, Preempt, Workload

MIN_REBUILD_GAP_S = 0.2
REBUILD_SHARE = 0.5
"""At most this share of the time goes to refreshing snapshots while the cache keeps moving (and
someone watches a page that needs them)."""


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
        reason = status.pending_reason if status is not None else ""
        return reason_in_words(reason, self.workloads.get(entry.workload))

    def reason_of(self, key: str) -> str:
        """The engine's sentence for a workload's pending part (empty when nothing waits), in
        the words the CLI and the events use."""
        return reason_in_words(self.driver.pending_reason(key) or "", self.workloads.get(key))

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
    """``converter.workload`` memoised per Workload, uid and resourceVersion (and priority classes)."""

    def __init__(self) -> None:
        self._memo: dict[str, tuple[str, str, int, Workload]] = {}

    def get(self, body: Obj, priority_of: Callable[[str], int | None], priority_version: int) -> Workload:
        meta = body["metadata"]
        key = _key(body)
        uid = str(meta.get("uid") or "")
        version = str(meta.get("resourceVersion") or "")
        hit = self._memo.get(key)
        if hit is not None and hit[:3] == (uid, version, priority_version):
            return hit[3]
        spec = converter.workload(body, priority_of)
        self._memo[key] = (uid, version, priority_version, spec)
        return spec

    def forget(self, key: str) -> None:
        self._memo.pop(key, None)


class WorkloadBodies(Mapping[str, Obj]):
    """The cached Workloads by ``namespace/name`` (finished ones included), read through."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getitem__(self, key: str) -> Obj:
        namespace, _, name = key.partition("/")
        body = self._store.get(namespace, name)
        if body is None:
            raise KeyError(key)
        return body

    def __iter__(self) -> Iterator[str]:
        return (f"{k.namespace}/{k.name}" for k in self._store.object_keys())

    def __len__(self) -> int:
        return len(self._store)


@dataclass(frozen=True)
class Loaded:
    """How a Workload was loaded into the copy."""

    restored: Parsed | None
    """the admission restored (None: none recorded, or its ClusterQueue was unknown then)"""
    evicting: bool
    recorded_queue: str | None
    """the ClusterQueue its recorded admission names, known or not"""


class QueueModel:
    """The copy of the engine (``cache.config``'s), kept loaded with every Workload."""

    def __init__(self, cache: DashboardCache, clock: Callable[[], float] = time.monotonic) -> None:
        self.cache = cache
        self.clock = clock
        self.conversions = WorkloadConversions()
        self.admissions = AdmissionMemo()
        self.driver = cache.config.driver
        self.specs: dict[str, Workload] = {}
        """``namespace/name`` -> the engine's view of every unfinished, well-formed Workload"""
        self._loaded: dict[str, Loaded] = {}
        self._touched: set[str] = set()
        """Workloads the copy's last cycle admitted or evicted: loaded again from their objects
        before the next cycle, so the copy never builds on a decision nobody carried out."""
        self._queues: frozenset[str] = frozenset()
        self._priority_version = -1
        self._snapshot: QueueSnapshot | None = None
        self._next_allowed = 0.0
        self.last_rebuild_s = 0.0
        self.last_applied = 0
        """Workloads applied by the last refresh (all of them on the first)."""

    def snapshot(self) -> QueueSnapshot:
        """The latest snapshot; refreshed first when the cache moved and the rate bound allows."""
        current = self._snapshot
        if current is not None and (
            current.version == self.cache.queue_version or self.clock() < self._next_allowed
        ):
            return current
        return self._refresh()

    @property
    def version(self) -> int:
        """The queue version (``cache.queue_version``) the latest snapshot reflects (-1: none)."""
        return self._snapshot.version if self._snapshot is not None else -1

    def behind(self) -> bool:
        """The latest snapshot is older than the cache (the rate bound held a refresh back)."""
        return self.version != self.cache.queue_version

    def rebuild_due_in(self) -> float:
        """Seconds until a snapshot of the newer cache may be taken (0: now)."""
        return max(0.0, self._next_allowed - self.clock())

    def _refresh(self) -> QueueSnapshot:
        started = self.clock()
        version = self.cache.queue_version
        changed = self.cache.take_changed_workloads()
        queues = frozenset(self.driver.engine.cluster_queue_names())
        if self._snapshot is None or self._priority_version != self.cache.priority_version:
            # First load, or priorities moved under every Workload that names a class.
            self._priority_version = self.cache.priority_version
            keys = {f"{k.namespace}/{k.name}" for k in self.cache.workloads.store.object_keys()}
            changed = keys | set(self._loaded)
        elif queues != self._queues:
            # A queue came or went: admissions recorded for it are restored, or no longer.
            moved = queues ^ self._queues
            changed |= {key for key, loaded in self._loaded.items() if loaded.recorded_queue in moved}
        self._queues = queues
        self._apply(changed, self._touched)
        # Parked workloads keep the sentence they were last given until their cohort tree frees
        # quota; a page shows what they would be told now (one look per group of look-alikes).
        self.driver.engine.wake_all()
        decisions = tuple(self.driver.cycle(time.time()))
        self._touched = _decided(decisions)
        admitted_now = frozenset(workload_key_of(d.workload) for d in decisions if isinstance(d, Admit))
        snapshot = QueueSnapshot(
            version,
            time.time(),
            self.driver,
            decisions,
            WorkloadBodies(self.cache.workloads.store),
            self.specs,
            admitted_now,
        )
        self._snapshot = snapshot
        self.last_applied = len(changed | self._touched)
        self.last_rebuild_s = self.clock() - started
        self._next_allowed = self.clock() + max(MIN_REBUILD_GAP_S, self.last_rebuild_s / REBUILD_SHARE)
        return snapshot

    def _apply(self, changed: set[str], touched: set[str]) -> None:
        """Into the copy, as the operator's driver takes them: a Workload whose recorded admission
        is as loaded gets its new demand (``Driver.submit``); one whose admission moved, a new one,
        or one the last cycle decided on is taken out and loaded again (restore, then submit);
        a deleted, finished or malformed one is taken out."""
        store = self.cache.workloads.store
        known = set(self.driver.engine.cluster_queue_names())
        priority_of = self.cache.config.priority_of
        reload: list[Obj] = []
        for key in sorted(changed | touched):
            namespace, _, name = key.partition("/")
            body = store.get(namespace, name)
            try:
                if body is None or is_finished(body):
                    raise LookupError(key)
                spec = self.conversions.get(body, priority_of, self._priority_version)
                admission = self.admissions.parsed(body)
            except (LookupError, ValueError, TypeError):
                # Gone or finished; or malformed: left out (the operator reports it), never fatal.
                self._forget(key)
                continue
            recorded = admission[0] if admission is not None else None
            restored = admission if recorded in known else None
            loaded = Loaded(restored, restored is not None and is_evicted(body), recorded)
            self.specs[key] = spec
            if key not in touched and self._loaded.get(key) == loaded:
                self.driver.submit(spec)
                continue
            self.driver.remove(key)
            self._loaded[key] = loaded
            reload.append(body)
        load_workloads(self.driver, reload, lambda b: self.specs[_key(b)], self.admissions.parsed)

    def _forget(self, key: str) -> None:
        self.driver.remove(key)
        self.specs.pop(key, None)
        self._loaded.pop(key, None)
        self.conversions.forget(key)


def _decided(decisions: Iterable[Decision]) -> set[str]:
    """The Workloads a cycle admitted, evicted or made preempt."""
    out = set()
    for decision in decisions:
        if isinstance(decision, Admit):
            out.add(workload_key_of(decision.workload))
        elif isinstance(decision, Preempt):
            out.update(workload_key_of(victim) for victim in decision.victims)
            if decision.preemptor:
                out.add(workload_key_of(decision.preemptor))
    return out


def _key(body: Mapping[str, Any]) -> str:
    return f"{body['metadata']['namespace']}/{body['metadata']['name']}"
