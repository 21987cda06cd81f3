"""A discrete-event simulation on a virtual clock that drives the real engine.

Time is kept in integer milliseconds so that events scheduled for the same
instant (an arrival and a completion, say) coincide exactly. After every
instant with events the engine runs one cycle; its decisions schedule
completions (admitted workloads run for their class's runtime) and releases
(preempted workloads' pods are gone after ``preemptionDelay`` and they queue
again, to start over).
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field
from enum import IntEnum

from rayquota.operator.queue.admission.driver import AdmittedSlice, Driver
from rayquota.queueing import HOSTNAME_LABEL, Engine, FlavorResource, Workload

from .scenario import Scenario, WorkloadClass


class _Event(IntEnum):
    # Ordered so that, at one instant, quota is freed before new work arrives.
    FINISH = 0
    RELEASE = 1
    ARRIVAL = 2


@dataclass(slots=True)
class WorkloadRecord:
    key: str
    workload_class: str
    cluster_queue: str
    arrival_ms: int
    runtime_ms: int
    admitted_ms: int | None = None
    last_admitted_ms: int = 0
    finished_ms: int | None = None
    preemptions: int = 0
    token: int = 0
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    domains: dict[str, int] = field(default_factory=dict)
    """What it holds per topology domain (of the scenario's domain level and resource)."""


@dataclass(slots=True)
class UsageIntegral:
    """Time integral of a step function of usage per resource."""

    current: dict[str, int] = field(default_factory=dict)
    integral: dict[str, int] = field(default_factory=dict)
    last_ms: int = 0

    def change(self, now_ms: int, resource: str, delta: int) -> None:
        elapsed = now_ms - self.last_ms
        if elapsed:
            for r, value in self.current.items():
                self.integral[r] = self.integral.get(r, 0) + value * elapsed
            self.last_ms = now_ms
        self.current[resource] = self.current.get(resource, 0) + delta

    def close(self, now_ms: int) -> None:
        self.change(now_ms, next(iter(self.current), ""), 0)


@dataclass(slots=True)
class SimulationResult:
    scenario: Scenario
    records: list[WorkloadRecord]
    makespan_ms: int
    cycles: int
    engine_seconds: float
    decisions: int
    total: UsageIntegral
    per_queue: dict[str, UsageIntegral]
    timeline: list[tuple[int, dict[str, int], int]]
    """(time ms, usage per resource, pending count) after each cycle that changed something"""
    capacity: dict[str, int]
    queue_nominal: dict[str, dict[str, int]]
    capacity_bound_ms: int
    arrival_bound_ms: int
    wasted: dict[str, int]
    """Work lost to preemption per resource (milli-units x ms): what victims ran before eviction."""
    domains: DomainUse | None = None


@dataclass(slots=True)
class DomainUse:
    """Use of one resource per domain of one topology level, over time."""

    level: str
    resource: str
    capacity: dict[str, int]
    used: UsageIntegral = field(default_factory=UsageIntegral)
    peak: dict[str, int] = field(default_factory=dict)

    def change(self, now_ms: int, held: dict[str, int], sign: int) -> None:
        for domain, amount in held.items():
            self.used.change(now_ms, domain, sign * amount)
            self.peak[domain] = max(self.peak.get(domain, 0), self.used.current.get(domain, 0))


class SimulationWriter:
    """The driver's writer on a virtual clock: it only notes what to schedule next."""

    def __init__(self) -> None:
        self.admitted_now: list[tuple[str, AdmittedSlice]] = []
        self.evicted_now: list[str] = []

    def admitted(self, workload: str, admission: AdmittedSlice) -> None:
        self.admitted_now.append((workload, admission))

    def pending(self, workload: str, reason: str, admitted: bool) -> None:
        pass

    def evict(self, workload: str, reason: str, preemptor: str | None, kind: str) -> None:
        self.evicted_now.append(workload)


@dataclass(slots=True)
class _RunState:
    """What one run of a simulation keeps as the virtual clock advances."""

    records: dict[str, WorkloadRecord]
    per_queue: dict[str, UsageIntegral]
    pending_specs: dict[str, Workload] = field(default_factory=dict)
    events: list[tuple[int, int, int, str, int]] = field(default_factory=list)
    """(time ms, event kind, sequence number, workload key, its token), a heap"""
    seq: int = 0
    total: UsageIntegral = field(default_factory=UsageIntegral)
    timeline: list[tuple[int, dict[str, int], int]] = field(default_factory=list)
    pending: int = 0
    cycles: int = 0
    decisions: int = 0
    engine_seconds: float = 0.0
    makespan: int = 0
    wasted: dict[str, int] = field(default_factory=dict)

    def schedule(self, at_ms: int, kind: _Event, key: str, token: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.events, (at_ms, kind, self.seq, key, token))


class Simulation:
    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.engine = Engine(fair_sharing=scenario.fair_sharing)
        self.writer = SimulationWriter()
        # The operator's driver, so the simulation admits exactly as the operator would.
        self.driver = Driver(self.engine, self.writer)
        for flavor in scenario.flavors:
            self.driver.configure(flavor)
        for cohort in scenario.cohorts:
            self.driver.configure(cohort)
        for cq in scenario.cluster_queues:
            self.driver.configure(cq)
        for lq in scenario.local_queues:
            self.driver.configure(lq)
        for topology in scenario.topologies:
            self.engine.upsert_topology(topology)
        for node in scenario.nodes:
            self.engine.upsert_node(node)
        self._cq_of_lq = {lq.key: lq.cluster_queue for lq in scenario.local_queues}
        self.domains = self._domain_use()
        # node name (its hostname label) -> its domain at the report's level
        self._domain_of_host = (
            {
                node.labels.get(HOSTNAME_LABEL, node.name): node.labels.get(self.domains.level, "")
                for node in scenario.nodes
            }
            if self.domains is not None
            else {}
        )

    def _domain_use(self) -> DomainUse | None:
        level = self.scenario.domain_level
        if level is None or not self.scenario.nodes:
            return None
        requested = {r for wc in self.scenario.classes for r in wc.pod_set.requests}
        special = sorted(r for r in requested if r not in ("cpu", "memory"))
        resource = special[0] if special else "cpu"
        capacity: dict[str, int] = {}
        for node in self.scenario.nodes:
            domain = node.labels.get(level)
            if domain is not None:
                capacity[domain] = capacity.get(domain, 0) + node.allocatable.get(resource, 0)
        return DomainUse(level, resource, capacity)

    def _held_per_domain(self, admission: AdmittedSlice) -> dict[str, int]:
        if self.domains is None:
            return {}
        held: dict[str, int] = {}
        for ps in admission.pod_sets:
            if ps.topology is None or not ps.count:
                continue
            per_pod = ps.usage.get(self.domains.resource, 0) // ps.count
            levels = ps.topology.levels
            for domain in ps.topology.domains:
                if levels[-1] == HOSTNAME_LABEL:
                    where = self._domain_of_host.get(domain.values[-1], "")
                else:
                    where = (
                        domain.values[levels.index(self.domains.level)]
                        if self.domains.level in levels
                        else ""
                    )
                held[where] = held.get(where, 0) + per_pod * domain.count
        return held

    def _workloads(self) -> list[tuple[int, Workload, WorkloadClass]]:
        arrivals: list[tuple[int, Workload, WorkloadClass]] = []
        for wc in self.scenario.classes:
            for queue in wc.queues:
                namespace, queue_name = queue.split("/", 1)
                for i in range(wc.count):
                    at = round((wc.start + i * wc.interval) * 1000)
                    wl = Workload(
                        namespace,
                        f"{wc.name}-{queue_name}-{i}",
                        queue_name,
                        (wc.pod_set,),
                        priority=wc.priority,
                        created=at / 1000,
                    )
                    arrivals.append((at, wl, wc))
        return arrivals

    def run(self) -> SimulationResult:
        state = _RunState(
            records={}, per_queue={cq.name: UsageIntegral() for cq in self.scenario.cluster_queues}
        )
        for at, wl, wc in self._workloads():
            state.records[wl.key] = WorkloadRecord(
                wl.key,
                wc.name,
                self._cq_of_lq.get(f"{wl.namespace}/{wl.queue_name}", ""),
                at,
                round(wc.runtime * 1000),
            )
            state.pending_specs[wl.key] = wl
            state.schedule(at, _Event.ARRIVAL, wl.key)
        while state.events:
            now = state.events[0][0]
            self._apply_events_at(state, now)
            started = time.perf_counter()
            decisions = self.driver.cycle(now / 1000)
            state.engine_seconds += time.perf_counter() - started
            state.cycles += 1
            state.decisions += len(decisions)
            self._start_admitted(state, now)
            self._stop_evicted(state, now)
            timeline = state.timeline
            if not timeline or timeline[-1][1] != state.total.current or timeline[-1][2] != state.pending:
                timeline.append((now, dict(state.total.current), state.pending))
        return self._result(state)

    def _apply_events_at(self, state: _RunState, now: int) -> None:
        """Everything due at ``now``: arrivals submitted, completions and releases freeing quota
        (a completion whose token is stale, its workload evicted since, is dropped)."""
        while state.events and state.events[0][0] == now:
            _, kind, _, key, token = heapq.heappop(state.events)
            rec = state.records[key]
            if kind == _Event.ARRIVAL:
                self.driver.submit(state.pending_specs.pop(key))
                state.pending += 1
            elif kind == _Event.FINISH and token == rec.token:
                self.driver.finish(key, pods_gone=True)
                self._charge(state, now, rec, -1)
                rec.finished_ms = now
                state.makespan = max(state.makespan, now)
            elif kind == _Event.RELEASE:
                self.driver.pods_gone(key)
                self._charge(state, now, rec, -1)
                state.pending += 1

    def _start_admitted(self, state: _RunState, now: int) -> None:
        """The cycle's admissions start running: their usage is charged and completion scheduled."""
        finish_delay_ms = round(self.scenario.finish_delay * 1000)
        for key, admission in self.writer.admitted_now:
            rec = state.records[key]
            if rec.admitted_ms is None:
                rec.admitted_ms = now
            rec.usage = dict(admission.usage)
            rec.domains = self._held_per_domain(admission)
            rec.last_admitted_ms = now
            rec.token += 1
            self._charge(state, now, rec, +1)
            state.pending -= 1
            state.schedule(now + rec.runtime_ms + finish_delay_ms, _Event.FINISH, rec.key, rec.token)
        self.writer.admitted_now.clear()

    def _stop_evicted(self, state: _RunState, now: int) -> None:
        """The cycle's victims lose the work done since admission; their pods go after the delay."""
        delay_ms = round(self.scenario.preemption_delay * 1000)
        for victim in self.writer.evicted_now:
            rec = state.records[victim]
            rec.preemptions += 1
            for (_, resource), amount in rec.usage.items():
                state.wasted[resource] = state.wasted.get(resource, 0) + amount * (now - rec.last_admitted_ms)
            rec.token += 1  # its pending completion will never happen
            state.schedule(now + delay_ms, _Event.RELEASE, victim)
        self.writer.evicted_now.clear()

    def _charge(self, state: _RunState, now: int, rec: WorkloadRecord, sign: int) -> None:
        queue = state.per_queue[rec.cluster_queue]
        for (_, resource), amount in rec.usage.items():
            state.total.change(now, resource, sign * amount)
            queue.change(now, resource, sign * amount)
        if self.domains is not None:
            self.domains.change(now, rec.domains, sign)

    def _result(self, state: _RunState) -> SimulationResult:
        makespan, records = state.makespan, state.records
        state.total.close(makespan)
        for queue in state.per_queue.values():
            queue.close(makespan)
        if self.domains is not None:
            self.domains.used.close(makespan)
        return SimulationResult(
            scenario=self.scenario,
            records=list(records.values()),
            makespan_ms=makespan,
            cycles=state.cycles,
            engine_seconds=state.engine_seconds,
            decisions=state.decisions,
            total=state.total,
            per_queue=state.per_queue,
            timeline=state.timeline,
            capacity=self._capacity(),
            queue_nominal=self._queue_nominal(),
            capacity_bound_ms=self._capacity_bound(records.values()),
            arrival_bound_ms=max((r.arrival_ms + r.runtime_ms for r in records.values()), default=0),
            wasted=state.wasted,
            domains=self.domains,
        )

    def _capacity(self) -> dict[str, int]:
        """All nominal quota per resource: every queue's and every cohort's own."""
        capacity: dict[str, int] = {}
        for node in self.engine.snapshot():
            if node.disabled_reason is None:
                for (_, resource), quota in node.quota.items():
                    capacity[resource] = capacity.get(resource, 0) + quota[0]
        return capacity

    def _queue_nominal(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for node in self.engine.snapshot():
            if node.is_cluster_queue:
                per_resource: dict[str, int] = {}
                for (_, resource), quota in node.quota.items():
                    per_resource[resource] = per_resource.get(resource, 0) + quota[0]
                out[node.name] = per_resource
        return out

    def _capacity_bound(self, records: object) -> int:
        """Total work routed to each cohort tree over that tree's quota; the largest, in ms."""
        nodes = {(n.is_cluster_queue, n.name): n for n in self.engine.snapshot()}
        root_of: dict[str, tuple[bool, str]] = {}
        for is_cq, name in nodes:
            if not is_cq:
                continue
            key = (True, name)
            while nodes[key].parent is not None:
                key = (False, str(nodes[key].parent))
            root_of[name] = key
        work: dict[tuple[tuple[bool, str], str], int] = {}
        for wc in self.scenario.classes:
            for queue in wc.queues:
                cq = self._cq_of_lq.get(queue)
                if cq is None or cq not in root_of:
                    continue
                for resource, amount in wc.pod_set.totals().items():
                    k = (root_of[cq], resource)
                    work[k] = work.get(k, 0) + amount * wc.count * round(wc.runtime * 1000)
        quota_of: dict[tuple[tuple[bool, str], str], int] = {}
        for key, node in nodes.items():
            root = key
            while nodes[root].parent is not None:
                root = (False, str(nodes[root].parent))
            for (_, resource), q in node.quota.items():
                quota_of[(root, resource)] = quota_of.get((root, resource), 0) + q[0]
        bound = 0
        for (root, resource), amount in work.items():
            quota = quota_of.get((root, resource), 0)
            if quota > 0:
                bound = max(bound, -(-amount // quota))
        return bound
