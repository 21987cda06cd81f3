"""``rayquota queues``, ``rayquota workloads`` and ``rayquota explain``: what the queues hold
and why a workload waits (the tables themselves are :mod:`rayquota.cli_tables`).

``explain`` rebuilds the admission engine from what the API server holds (the same
converter and driver the operator uses), runs one cycle on that copy, and reads the
answer off it: nothing is written.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rayquota import cli_topology
from rayquota.cli_tables import (
    inactive_reason,
    pending_reason,
    queues_table,
    requested,
    workload_phase,
    workloads_table,
)
from rayquota.operator.kube import KubeClient
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.admission.driver import Driver, IgnoredDecisions, workload_key_of
from rayquota.operator.queue.admission.workload_status import is_evicted, is_finished
from rayquota.operator.queue.demand import slice_growth
from rayquota.operator.queue.demand.pod_set_words import reason_in_words, words_of
from rayquota.operator.queue.kueue.api_group import RAYQUOTA, QueueApi, quota_objects
from rayquota.queueing import (
    Admit,
    Engine,
    Pending,
    Phase,
    PodSetAssignment,
    Preempt,
    Workload,
    format_quantity,
)

Obj = Mapping[str, Any]
# What `rayquota explain KIND/NAME` accepts: every queued kind (singular or plural, as the
# Workload's owner-kind label spells it), and the Workload itself.
KIND_ALIASES = {
    **{
        alias: kind.lower()
        for kind, adapter in ADAPTERS.items()
        for alias in (kind.lower(), adapter.resource.plural)
    },
    "workload": "workload",
    "workloads": "workload",
    "wl": "workload",
}


@dataclass
class QueueState:
    """Everything the views read, fetched once."""

    flavors: list[Obj] = field(default_factory=list)
    cohorts: list[Obj] = field(default_factory=list)
    cluster_queues: list[Obj] = field(default_factory=list)
    local_queues: list[Obj] = field(default_factory=list)
    workloads: list[Obj] = field(default_factory=list)
    priority_classes: list[Obj] = field(default_factory=list)
    # Topology placement's inputs, for explain.
    topologies: list[Obj] = field(default_factory=list)
    nodes: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    clusters: list[Obj] = field(default_factory=list)


async def fetch_state(
    namespace: str | None = None,
    connect: Callable[[], KubeClient] = KubeClient.from_environment,
    api: QueueApi = RAYQUOTA,
) -> QueueState:
    """``connect`` opens the client (default: in-cluster credentials or $KUBECONFIG); ``api``
    names the group the quota objects are read from (default: rayquota.io)."""
    client = connect()
    try:
        lists = await asyncio.gather(
            *(
                client.list_items(resource.path(namespace if resource.namespaced else None))
                for resource in quota_objects(api)
            )
        )
    finally:
        await client.close()
    flavors, cohorts, cluster_queues, local_queues, workloads, priority_classes = lists
    state = QueueState(
        list(flavors),
        list(cohorts),
        list(cluster_queues),
        list(local_queues),
        list(workloads),
        list(priority_classes),
    )
    if any((f.get("spec") or {}).get("topologyName") for f in state.flavors):
        await cli_topology.fetch(state, connect, api)
    return state


# --- rayquota explain -----------------------------------------------------------------------


def rebuild(state: QueueState) -> Driver:
    """The engine as the operator has it: configuration, admitted Workloads restored (with the
    rest of their demand as a waiting slice, as the operator submits it), the rest pending."""
    priorities = {str(p["metadata"]["name"]): int(p.get("value") or 0) for p in state.priority_classes}
    driver = Driver(Engine(), IgnoredDecisions())  # explain only reads the engine afterwards
    for flavor in state.flavors:
        driver.configure(converter.resource_flavor(flavor))
    for cohort in state.cohorts:
        driver.configure(converter.cohort(cohort))
    for cq in state.cluster_queues:
        driver.configure(converter.cluster_queue(cq))
    for lq in state.local_queues:
        driver.configure(converter.local_queue(lq))
    cli_topology.feed(
        driver.engine, state.topologies, state.nodes, state.pods, state.workloads, state.clusters
    )
    load_workloads(driver, state.workloads, lambda wl: converter.workload(wl, priorities.get))
    return driver


WorkloadConversion = Callable[[Obj], Workload]
AdmissionParse = Callable[[Obj], "tuple[str, tuple[PodSetAssignment, ...]] | None"]


def recorded_admission(workload: Obj) -> tuple[str, tuple[PodSetAssignment, ...]] | None:
    admission = (workload.get("status") or {}).get("admission")
    return converter.admission_from_api(admission) if admission else None


def load_workloads(
    driver: Driver,
    workloads: Iterable[Obj],
    convert: WorkloadConversion,
    admission_of: AdmissionParse = recorded_admission,
) -> None:
    """Into a configured driver, as the operator's start-up does: each admission recorded in a
    Workload's status restored, then every unfinished Workload's demand submitted (an admitted
    one whose demand grew waits as a scale-up slice; one whose demand is exactly its admission
    needs no submit). ``convert`` and ``admission_of`` read the Workload as the engine sees it
    (callers may memoise them)."""
    known = set(driver.engine.cluster_queue_names())
    for wl in workloads:
        if is_finished(wl):
            continue
        spec = convert(wl)
        admission = admission_of(wl)
        if admission is not None and admission[0] in known:
            driver.restore(spec, admission[0], admission[1], evicting=is_evicted(wl))
            if demand_is_admission(spec, admission[1]):
                continue
        driver.submit(spec)


def demand_is_admission(spec: Workload, assignments: Sequence[PodSetAssignment]) -> bool:
    """The demand is exactly what was admitted: same pod sets and counts, same totals."""
    admitted = {ps.name: ps for ps in assignments}
    if set(admitted) != {ps.name for ps in spec.pod_sets}:
        return False
    for pod_set in spec.pod_sets:
        got = admitted[pod_set.name]
        if got.count != pod_set.count or dict(got.usage) != pod_set.totals():
            return False
    return True


def find_workload(state: QueueState, kind: str, name: str, namespace: str) -> Obj | None:
    for wl in state.workloads:
        meta = wl["metadata"]
        if meta["namespace"] != namespace:
            continue
        if kind == "workload" and meta["name"] == name:
            return wl
        labels = meta.get("labels") or {}
        if labels.get("rayquota.io/owner-kind") == kind and labels.get("rayquota.io/owner-name") == name:
            return wl
    return None


def explain(state: QueueState, kind: str, name: str, namespace: str) -> str:
    workload = find_workload(state, kind, name, namespace)
    if workload is None:
        return f"{kind}/{name} in {namespace} has no Workload: not queued (no queue label?) or not seen yet"
    key = f"{namespace}/{workload['metadata']['name']}"
    driver = rebuild(state)
    engine = driver.engine
    decisions = driver.cycle(0.0)
    lines = [f"{kind}/{name}: Workload {key}, {workload_phase(workload)}"]
    spec = converter.workload(workload)
    lines.append("  needs: " + requested(workload) + f" (priority {spec.priority})")
    status = engine.workload(key)
    cluster_queue = status.cluster_queue if status is not None else None
    if cluster_queue is None:
        reason = (status.pending_reason if status else "") or pending_reason(workload)
        lines.append(
            f"  queue: LocalQueue {spec.queue_name} leads nowhere: {reason_in_words(reason, workload)}"
        )
        return "\n".join(lines)
    lines.append(f"  ClusterQueue: {cluster_queue}")
    known = {str(f["metadata"]["name"]) for f in state.flavors}
    body = next((c for c in state.cluster_queues if c["metadata"]["name"] == cluster_queue), None)
    inactive = inactive_reason(body) if body is not None else None
    if inactive is not None:
        lines.append(f"  the ClusterQueue is inactive ({inactive[0]}): {inactive[1]}")
    lines.append("  free now: " + _free(engine, cluster_queue, known))
    flavors = sorted({flavor for flavor, _ in _quota_keys(engine, cluster_queue) if flavor in known})
    lines.extend(cli_topology.room_lines(engine, spec, flavors))
    if workload_phase(workload) == "Admitted":
        waiting = driver.pending_reason(key)
        if waiting:
            lines.extend(_waiting_slice(workload, spec, reason_in_words(waiting, workload)))
    if workload_phase(workload) not in ("Pending", "Inadmissible"):
        return "\n".join(lines)
    ahead = _ahead(state, engine, key, cluster_queue)
    lines.append(f"  queue position: {len(ahead) + 1}" + (f" (behind {', '.join(ahead)})" if ahead else ""))
    holders = [
        k
        for k in engine.workload_keys()
        if (s := engine.workload(k)) and s.phase is not Phase.PENDING and s.cluster_queue == cluster_queue
    ]
    if holders:
        lines.append("  holding quota in this ClusterQueue: " + ", ".join(sorted(holders)))
    for decision in decisions:
        if isinstance(decision, Preempt) and (decision.preemptor == key or key in decision.victims):
            lines.append(f"  preemption: {decision.reason}; victims {', '.join(decision.victims)}")
        elif isinstance(decision, Pending) and workload_key_of(decision.workload) == key:
            lines.append(f"  why it waits: {reason_in_words(decision.reason, workload)}")
        elif isinstance(decision, Admit) and decision.workload == key:
            lines.append("  it fits now: the next admission cycle admits it")
    if (
        not any(isinstance(d, Pending) and workload_key_of(d.workload) == key for d in decisions)
        and status
        and status.pending_reason
    ):
        lines.append(f"  why it waits: {reason_in_words(status.pending_reason, workload)}")
    return "\n".join(lines)


def _waiting_slice(workload: Obj, spec: Workload, why: str) -> list[str]:
    """An admitted Workload asking for more (a RayService's upgrade adds its new cluster's pod
    sets, an autoscaler's scale-up raises a worker group's count): why the difference waits,
    then each grown pod set in its user's words and how much more it asks for."""
    admission = recorded_admission(workload)
    grown = slice_growth.growth(spec, admission[1] if admission else ())
    kind = (workload["metadata"].get("labels") or {}).get("rayquota.io/owner-kind")
    lines = [f"  more is asked for ({_growth_cause(kind, grown)}) and waits: {why}"]
    words = words_of(workload)
    lines.extend(f"    {slice_growth.growth_line(g, words)}" for g in grown)
    return lines


def _growth_cause(kind: str | None, grown: Sequence[slice_growth.Growth]) -> str:
    """A RayService's new pod set is its upgrade's; a pod set of its that grows may be an
    upgrade to the same shape (the clusters share it) or its autoscaler: both are said."""
    if kind != "rayservice":
        return "a scale-up"
    return "an upgrade" if any(g.admitted == 0 for g in grown) else "an upgrade or a scale-up"


def _quota_keys(engine: Engine, cluster_queue: str) -> list[tuple[str, str]]:
    node = next(n for n in engine.snapshot() if n.is_cluster_queue and n.name == cluster_queue)
    return sorted(node.quota)


def _free(engine: Engine, cluster_queue: str, flavors: Iterable[str]) -> str:
    """What could be admitted now, per flavor and resource; a flavor the queue lists that does
    not exist has nothing free, whatever its quota says, and is named as missing."""
    node = next(n for n in engine.snapshot() if n.is_cluster_queue and n.name == cluster_queue)
    known = set(flavors)
    missing = sorted({flavor for flavor, _ in node.quota if flavor not in known})
    parts = [
        f"{flavor}/{res} {format_quantity(engine.available(cluster_queue, flavor, res), res)}"
        for flavor, res in sorted(node.quota)
        if flavor in known
    ]
    parts += [f"{flavor} (no such ResourceFlavor)" for flavor in missing]
    return ", ".join(parts) or "-"


def _ahead(state: QueueState, engine: Engine, key: str, cluster_queue: str) -> list[str]:
    """Pending workloads of the same ClusterQueue that come first (priority, then age)."""
    order = {}
    for wl in state.workloads:
        wl_key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
        status = engine.workload(wl_key)
        if status is None or status.phase is not Phase.PENDING or status.cluster_queue != cluster_queue:
            continue
        spec = converter.workload(wl)
        order[wl_key] = (-spec.priority, spec.created, wl_key)
    mine = order.get(key)
    return [k for k, o in sorted(order.items(), key=lambda kv: kv[1]) if mine is not None and o < mine]


# --- entry points ---------------------------------------------------------------------------


def main_queues(api: QueueApi = RAYQUOTA, wide: bool = False) -> int:
    print(queues_table(asyncio.run(fetch_state(api=api)), wide))
    return 0


def main_workloads(namespace: str | None, api: QueueApi = RAYQUOTA, wide: bool = False) -> int:
    print(workloads_table(asyncio.run(fetch_state(namespace, api=api)), wide))
    return 0


def main_explain(target: str, namespace: str, api: QueueApi = RAYQUOTA) -> int:
    kind, _, name = target.partition("/")
    if not name or kind.lower() not in KIND_ALIASES:
        print(
            f"usage: rayquota explain {'|'.join(sorted({*(k.lower() for k in ADAPTERS), 'workload'}))}/NAME "
            "-n NAMESPACE",
            file=sys.stderr,
        )
        return 2
    print(explain(asyncio.run(fetch_state(api=api)), KIND_ALIASES[kind.lower()], name, namespace))
    return 0
