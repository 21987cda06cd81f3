"""The placement check of the TAS benchmark: every topology assignment a controller records,
checked against the Nodes, while Kueue's runner runs.

Kueue's runner creates Workloads, never pods (it marks a Workload finished once it has been
admitted for its runtime), so there is no pod whose node could be looked at. What the
controller decides is the assignment in each Workload's ``status.admission``: the nodes and pod
counts the pods would be pinned to. This watch follows every Workload in the order the API
server recorded the writes and checks, for both controllers alike:

- every assigned node exists and carries the flavor's node labels;
- a pod set with a required rack has all its pods on nodes of one rack; a sliced pod set has,
  per rack, a multiple of its slice size;
- at every moment, what the held assignments put on a node (cpu, pod slots) stays within its
  allocatable (an assignment is held from its admission until the Workload finishes or its
  admission is cleared).

Kueue's shape names a node by its ``kubernetes.io/hostname`` value alone, and Kueue's TAS
config labels the nodes of every rack ``node-0`` .. ``node-63``: one value is carried by one
node per rack. An assignment to such a value may be on any of them, so the check holds it
against the *group* of nodes carrying the value (their allocatable summed), and a pod set whose
pods go to such a group cannot be checked for its rack (counted in ``ambiguous_pod_sets``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import harness
from rayquota.operator.queue.admission import converter
from rayquota.operator.ray.builders.pod_resources import pod_requests
from rayquota.queueing import HOSTNAME_LABEL, parse_quantity

RACK = "cloud.provider.com/topology-rack"
FLAVOR_LABELS = {"tas-node-group": "tas"}
POLL_USER_AGENT = "rayquota-benchmark-tas-check/0"


@dataclass
class TasCheck:
    workloads_placed: int = 0
    pods_placed: int = 0
    violations: list[str] = field(default_factory=list)
    """the first few (``violation_count`` says how many)"""
    violation_count: int = 0
    peak_node_cpu_pct: float = 0.0
    peak_node_pods: int = 0
    shared_hostnames: int = 0
    """hostname values carried by more than one node"""
    ambiguous_pod_sets: int = 0
    """pod sets whose rack cannot be told from the assignment (a shared hostname value)"""
    relists: int = 0
    """times the watch started again from a fresh list (410 Gone); each may hide transitions"""
    watch_errors: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.violation_count and self.workloads_placed > 0

    def violate(self, what: str) -> None:
        self.violation_count += 1
        if len(self.violations) < 50:
            self.violations.append(what)


@dataclass
class _Node:
    """The nodes carrying one hostname value (usually one node)."""

    cpu: int
    pods: int
    racks: set[str]
    flavor_nodes: bool
    """every one of them carries the flavor's node labels"""
    nodes: int = 1
    used_cpu: int = 0
    used_pods: int = 0


class AssignmentWatch(harness.WorkloadFollower):
    """Started before the runner, stopped after it: follows Workloads until told to stop."""

    user_agent = POLL_USER_AGENT

    def __init__(self, kubeconfig: Path, journal: Path | None = None) -> None:
        super().__init__(kubeconfig, "tas-check")
        self.journal = journal
        """where every observed transition is written (JSON lines), to explain a violation"""
        self._journal: list[dict[str, Any]] = []
        self.result = TasCheck()
        self._nodes: dict[str, _Node] = {}
        self._held: dict[str, list[tuple[str, int, int]]] = {}
        """workload -> (node, cpu, pods) it holds"""
        self._core: Any = None

    def stop(self) -> TasCheck:
        self.stop_following()
        if self.journal is not None:
            self.journal.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in self._journal))
        self.result.relists = self.relists
        self.result.watch_errors = list(self.watch_errors)
        return self.result

    def on_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        from kubernetes import client

        self._note(kind, obj)
        if kind == "DELETED":
            self._release(_key(obj))
            return
        if self._core is None:
            self._core = client.CoreV1Api(self.api_client)
        self._observe(obj, self._core)

    def _note(self, kind: str, obj: Mapping[str, Any]) -> None:
        if self.journal is None:
            return
        status = obj.get("status") or {}
        self._journal.append(
            {
                "t": round(time.time(), 3),
                "type": kind,
                "key": _key(obj),
                "rv": obj["metadata"].get("resourceVersion"),
                "conditions": {
                    c.get("type"): c.get("status") for c in status.get("conditions") or () if c.get("type")
                },
                "admission": status.get("admission"),
            }
        )

    # ------------------------------------------------------------------ checks

    def _load_nodes(self, core: Any) -> None:
        groups: dict[str, _Node] = {}
        for node in core.list_node().items:
            allocatable = node.status.allocatable or {}
            labels = node.metadata.labels or {}
            cpu = parse_quantity(str(allocatable.get("cpu", "0")))
            pods = int(str(allocatable.get("pods", "110")))
            flavor = all(labels.get(k) == v for k, v in FLAVOR_LABELS.items())
            host = labels.get(HOSTNAME_LABEL, node.metadata.name)
            group = groups.get(host)
            if group is None:
                groups[host] = _Node(cpu, pods, {labels.get(RACK, "")}, flavor)
            else:
                group.cpu += cpu
                group.pods += pods
                group.racks.add(labels.get(RACK, ""))
                group.flavor_nodes = group.flavor_nodes and flavor
                group.nodes += 1
        for host, group in groups.items():
            known = self._nodes.get(host)
            if known is not None:  # keep what the held assignments use
                group.used_cpu, group.used_pods = known.used_cpu, known.used_pods
            self._nodes[host] = group
        self.result.shared_hostnames = sum(1 for g in self._nodes.values() if g.nodes > 1)

    def _observe(self, workload: Mapping[str, Any], core: Any) -> None:
        key = _key(workload)
        status = workload.get("status") or {}
        finished = any(
            c.get("type") == "Finished" and c.get("status") == "True" for c in status.get("conditions") or ()
        )
        admission = status.get("admission")
        if finished or not admission:
            self._release(key)
            return
        if key in self._held:
            return
        pod_sets = {ps["name"]: ps for ps in (workload.get("spec") or {}).get("podSets") or ()}
        held: list[tuple[str, int, int]] = []
        for assignment in admission.get("podSetAssignments") or ():
            topology = converter.topology_assignment_from_api(assignment.get("topologyAssignment"))
            spec = pod_sets.get(assignment["name"], {})
            if topology is None:
                self.result.violate(f"{key}: pod set {assignment['name']} has no topology assignment")
                continue
            cpu = pod_requests(((spec.get("template") or {}).get("spec")) or {}).get("cpu", 0)
            request = spec.get("topologyRequest") or {}
            if topology.count != int(assignment.get("count") or spec.get("count") or 0):
                self.result.violate(
                    f"{key}: assigns {topology.count} pods, admitted {assignment.get('count')}"
                )
            racks: dict[str, int] = {}
            ambiguous = False
            for domain in topology.domains:
                host = domain.values[-1]
                node = self._nodes.get(host)
                if node is None:
                    self._load_nodes(core)
                    node = self._nodes.get(host)
                if node is None:
                    self.result.violate(f"{key}: assigned to node {host}, which does not exist")
                    continue
                if not node.flavor_nodes:
                    self.result.violate(f"{key}: node {host} is not a node of the flavor")
                if len(node.racks) > 1:
                    ambiguous = True
                else:
                    rack = next(iter(node.racks))
                    racks[rack] = racks.get(rack, 0) + domain.count
                held.append((host, cpu * domain.count, domain.count))
            if ambiguous:
                self.result.ambiguous_pod_sets += 1
            elif request.get("required") and len(racks) > 1:
                self.result.violate(f"{key}: required rack, placed in racks {sorted(racks)}")
            size = int(request.get("podSetSliceSize") or 1)
            if not ambiguous and size > 1 and any(n % size for n in racks.values()):
                self.result.violate(f"{key}: slices of {size} split across racks {racks}")
            self.result.pods_placed += topology.count
        self.result.workloads_placed += 1
        self._held[key] = held
        for host, cpu, pods in held:
            node = self._nodes[host]
            node.used_cpu += cpu
            node.used_pods += pods
            if node.used_cpu > node.cpu or node.used_pods > node.pods:
                self.result.violate(
                    f"{key}: node {host}{_group(node)} over its room: {node.used_cpu}m of "
                    f"{node.cpu}m cpu, {node.used_pods} of {node.pods} pods"
                )
            self.result.peak_node_cpu_pct = max(self.result.peak_node_cpu_pct, 100 * node.used_cpu / node.cpu)
            self.result.peak_node_pods = max(self.result.peak_node_pods, node.used_pods)

    def _release(self, key: str) -> None:
        for host, cpu, pods in self._held.pop(key, ()):
            node = self._nodes[host]
            node.used_cpu -= cpu
            node.used_pods -= pods


def _group(node: _Node) -> str:
    return f" ({node.nodes} nodes carry this hostname)" if node.nodes > 1 else ""


def _key(workload: Mapping[str, Any]) -> str:
    return f"{workload['metadata'].get('namespace')}/{workload['metadata']['name']}"
