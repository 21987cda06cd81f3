"""Scenario files for ``rayquota simulate``.

A scenario is YAML. Field names follow the rayquota.io/v1alpha1 API where
one exists; times are in seconds; quantities are Kubernetes quantities::

    name: gpu-teams
    fairSharing: false          # order queues of a cohort by weighted dominant share
    preemptionDelay: 0          # seconds from a Preempt decision until the victims' pods are gone
    finishDelay: 0              # seconds from the end of a workload's run until its quota is free
                                # (Kueue's perf runner marks a Workload Finished a round trip later)
    flavors:
      - name: h100
        nodeLabels: {gpu: h100}
        nodeTaints: [{key: dedicated, value: ml, effect: NoSchedule}]
        tolerations: []
    cohorts:                    # optional; cohorts named by queues but not listed here have no own quota
      - name: research
        parent: null
        resourceGroups: []      # same shape as a ClusterQueue's
    clusterQueues:
      - name: team-a
        cohort: research
        queueingStrategy: BestEffortFIFO        # or StrictFIFO
        preemption:
          withinClusterQueue: LowerPriority     # Never | LowerPriority | LowerOrNewerEqualPriority
          reclaimWithinCohort: Any              # Never | LowerPriority | Any
          borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
        flavorFungibility: {whenCanBorrow: Borrow, whenCanPreempt: TryNextFlavor}
        fairSharing: {weight: 1}
        resourceGroups:
          - coveredResources: [nvidia.com/gpu]
            flavors:
              - name: h100
                resources:
                  - {name: nvidia.com/gpu, nominalQuota: 16, borrowingLimit: 8, lendingLimit: 4}
    topology:                   # optional: generate many identical queues instead of listing them
      cohorts: 5                # cohort-0 .. cohort-4
      queuesPerCohort: 6        # cohort-0-cq-0 .. (each with LocalQueue <name>/default)
      clusterQueue: {...}       # a ClusterQueue without name and cohort
    localQueues:                # optional; by default every ClusterQueue gets <name>/default
      - {namespace: team-a, name: default, clusterQueue: team-a}
    workloadClasses:
      - name: small
        queues: ["*"]           # LocalQueues as namespace/name; "*" means every LocalQueue
        count: 350              # workloads per queue
        interval: 0.1           # seconds between arrivals, per queue
        start: 0                # first arrival
        runtime: 0.2            # seconds of running once admitted (restarts after preemption)
        priority: 50
        pods: 1                 # pods per workload ...
        requests: {nvidia.com/gpu: 1}   # ... each requesting this
        nodeSelector: {}
        topologyRequest: {required: topology.rayquota.io/rack}   # Kueue's PodSetTopologyRequest
    # Topology-aware admission (optional): Topologies, racks of nodes in the nodes file's format
    # (rayquota.localcluster.nodes), and a flavor naming the topology (topologyName).
    topologies:
      - {name: racks, levels: [topology.rayquota.io/block, topology.rayquota.io/rack, kubernetes.io/hostname]}
    nodes:
      - {name: h100, count: 4, blocks: 2, racks: 2, cpu: "64", memory: 512Gi, gpus: 8}
    domainLevel: topology.rayquota.io/rack    # the level the report's per-domain use is given at
    # DRA devices (optional, see scenario_dra): Kueue's deviceClassMappings, ResourceClaimTemplate
    # bodies, and a workload class's resourceClaims (a pod spec's), charged as the operator does.
    deviceClassMappings: [{name: example.com/gpu, deviceClassNames: [gpu.example.com]}]
    resourceClaimTemplates: [{metadata: {name: two-gpus}, spec: {spec: {devices: {requests: [...]}}}}]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from rayquota.localcluster.nodes import pools_from
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.admission.topology_feed import cluster_node
from rayquota.operator.queue.demand import topology_request
from rayquota.queueing import (
    ClusterNode,
    ClusterQueue,
    Cohort,
    LocalQueue,
    PodSet,
    ResourceFlavor,
    Topology,
)
from rayquota.simulation.scenario_dra import DraScenarioError, claim_requests, claim_templates, dra_settings


class ScenarioError(ValueError):
    """The scenario file is malformed; the message names the field."""


@dataclass(frozen=True, slots=True)
class WorkloadClass:
    name: str
    queues: tuple[str, ...]
    count: int
    interval: float
    start: float
    runtime: float
    priority: int
    pod_set: PodSet


@dataclass(slots=True)
class Scenario:
    name: str
    fair_sharing: bool = False
    preemption_delay: float = 0.0
    finish_delay: float = 0.0
    flavors: list[ResourceFlavor] = field(default_factory=list)
    cohorts: list[Cohort] = field(default_factory=list)
    cluster_queues: list[ClusterQueue] = field(default_factory=list)
    local_queues: list[LocalQueue] = field(default_factory=list)
    classes: list[WorkloadClass] = field(default_factory=list)
    topologies: list[Topology] = field(default_factory=list)
    nodes: list[ClusterNode] = field(default_factory=list)
    domain_level: str | None = None


def _cluster_queue(raw: Mapping[str, Any], name: str, cohort: str | None) -> ClusterQueue:
    try:
        return converter.cluster_queue_from_spec(name, raw, cohort)
    except converter.ConversionError as exc:
        raise ScenarioError(str(exc)) from exc


def parse_scenario(raw: Mapping[str, Any], default_name: str = "scenario") -> Scenario:
    if not isinstance(raw, Mapping):
        raise ScenarioError("a scenario must be a YAML mapping")
    scenario = Scenario(
        name=str(raw.get("name", default_name)),
        fair_sharing=bool(raw.get("fairSharing", False)),
        preemption_delay=float(raw.get("preemptionDelay", 0)),
        finish_delay=float(raw.get("finishDelay", 0)),
    )
    try:
        for flavor in raw.get("flavors") or ():
            scenario.flavors.append(converter.flavor_from_spec(str(flavor["name"]), flavor))
        for cohort in raw.get("cohorts") or ():
            scenario.cohorts.append(converter.cohort_from_spec(str(cohort["name"]), cohort))
    except converter.ConversionError as exc:
        raise ScenarioError(str(exc)) from exc
    _parse_topology(raw, scenario)
    for cq in raw.get("clusterQueues") or ():
        scenario.cluster_queues.append(_cluster_queue(cq, str(cq["name"]), cq.get("cohort")))
    topology = raw.get("topology")
    if topology:
        template = topology.get("clusterQueue") or {}
        for c in range(int(topology.get("cohorts", 1))):
            cohort_name = f"cohort-{c}"
            for q in range(int(topology.get("queuesPerCohort", 1))):
                scenario.cluster_queues.append(_cluster_queue(template, f"{cohort_name}-cq-{q}", cohort_name))
    for lq in raw.get("localQueues") or ():
        scenario.local_queues.append(
            LocalQueue(str(lq["namespace"]), str(lq["name"]), str(lq["clusterQueue"]))
        )
    if not scenario.local_queues:
        scenario.local_queues = [LocalQueue(cq.name, "default", cq.name) for cq in scenario.cluster_queues]
    all_queues = tuple(lq.key for lq in scenario.local_queues)
    try:
        settings, templates = dra_settings(raw), claim_templates(raw)
    except DraScenarioError as exc:
        raise ScenarioError(str(exc)) from exc
    for wc in raw.get("workloadClasses") or ():
        name = str(wc["name"])
        queues = tuple(str(q) for q in wc.get("queues") or ["*"])
        try:
            devices = claim_requests(wc, f"workloadClass {name}", settings, templates)
            pod_set = PodSet.of(
                "main",
                int(wc.get("pods", 1)),
                dict(wc.get("requests") or {}),
                dict(wc.get("nodeSelector") or {}),
                topology_request=topology_request.from_api(wc.get("topologyRequest")),
            )
        except DraScenarioError as exc:
            raise ScenarioError(str(exc)) from exc
        except ValueError as exc:
            raise ScenarioError(f"workloadClass {name}: {exc}") from exc
        if devices:
            summed = dict(pod_set.requests)
            for resource, milli in devices.items():
                summed[resource] = summed.get(resource, 0) + milli
            pod_set = replace(pod_set, requests=summed)
        scenario.classes.append(
            WorkloadClass(
                name=name,
                queues=all_queues if "*" in queues else queues,
                count=int(wc.get("count", 1)),
                interval=float(wc.get("interval", 0)),
                start=float(wc.get("start", 0)),
                runtime=float(wc["runtime"]),
                priority=int(wc.get("priority", 0)),
                pod_set=pod_set,
            )
        )
        unknown = set(scenario.classes[-1].queues) - set(all_queues)
        if unknown:
            raise ScenarioError(f"workloadClass {name}: unknown LocalQueue(s) {sorted(unknown)}")
    return scenario


def _parse_topology(raw: Mapping[str, Any], scenario: Scenario) -> None:
    for index, entry in enumerate(raw.get("topologies") or ()):
        levels = [
            level.get("nodeLabel") if isinstance(level, Mapping) else level
            for level in entry.get("levels") or ()
        ]
        if not entry.get("name") or not levels or not all(levels):
            raise ScenarioError(f"topologies[{index}]: needs a name and levels (node labels, highest first)")
        scenario.topologies.append(Topology(str(entry["name"]), tuple(str(level) for level in levels)))
    try:
        pools = pools_from(raw["nodes"], "nodes") if raw.get("nodes") else ()
    except ValueError as exc:
        raise ScenarioError(str(exc)) from exc
    # kwok would report them Ready: the simulation's nodes are.
    scenario.nodes = [replace(cluster_node(m), ready=True) for pool in pools for m in pool.manifests()]
    level = raw.get("domainLevel")
    if level is None and scenario.topologies:
        first = scenario.topologies[0].levels
        level = first[-2] if len(first) > 1 else first[0]
    scenario.domain_level = str(level) if level else None


def load_scenario(path: Path) -> Scenario:
    with path.open() as handle:
        raw = yaml.safe_load(handle)
    return parse_scenario(raw, default_name=path.stem)
