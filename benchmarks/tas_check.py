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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rayquota.operator.queue import converter
from rayquota.operator.ray.pod_resources import pod_requests
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

    @property
    def passed(self) -> bool:
        return not self.violation_count and self.workloads_placed > 0

    def violate(self, what: str) -> None:
        self.violation_count += 1
        if len(self.violations) < 50:
            self.violations.append(what)


@dataclass
class _Node:
    cpu: int
    pods: int
    rack: str
    labels: Mapping[str, str]
    used_cpu: int = 0
    used_pods: int = 0


class AssignmentWatch(threading.Thread):
    """Started before the runner, stopped after it: waits for the kubeconfig the runner writes,
    then watches Workloads until told to stop."""

    def __init__(self, kubeconfig: Path) -> None:
        super().__init__(name="tas-check", daemon=True)
        self.kubeconfig = kubeconfig
        self.result = TasCheck()
        self._stop_flag = threading.Event()
        self._nodes: dict[str, _Node] = {}
        self._held: dict[str, list[tuple[str, int, int]]] = {}
        """workload -> (node, cpu, pods) it holds"""

    def stop(self) -> TasCheck:
        self._stop_flag.set()
        self.join(timeout=60)
        return self.result

    # ------------------------------------------------------------------ the watch

    def run(self) -> None:
        from kubernetes import client, config, watch

        while not self.kubeconfig.exists():
            if self._stop_flag.wait(0.5):
                return
        api_client = config.new_client_from_config(config_file=str(self.kubeconfig))
        api_client.user_agent = POLL_USER_AGENT
        custom = client.CustomObjectsApi(api_client)
        core = client.CoreV1Api(api_client)
        version = ""
        while not self._stop_flag.is_set():
            try:
                if not version:
                    listed = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloads")
                    version = listed["metadata"]["resourceVersion"]
                    for item in listed.get("items") or ():
                        self._observe(item, core)
                stream = watch.Watch().stream(
                    custom.list_cluster_custom_object,
                    "kueue.x-k8s.io",
                    "v1beta2",
                    "workloads",
                    resource_version=version,
                    timeout_seconds=5,
                )
                for event in stream:
                    obj = event["object"]
                    version = obj["metadata"]["resourceVersion"]
                    if event["type"] == "DELETED":
                        self._release(_key(obj))
                    else:
                        self._observe(obj, core)
            except Exception as exc:  # the API server starts late and stops early
                if "410" in str(exc):
                    version = ""
                time.sleep(0.5)

    # ------------------------------------------------------------------ checks

    def _load_nodes(self, core: Any) -> None:
        for node in core.list_node().items:
            allocatable = node.status.allocatable or {}
            labels = node.metadata.labels or {}
            self._nodes.setdefault(
                labels.get(HOSTNAME_LABEL, node.metadata.name),
                _Node(
                    parse_quantity(str(allocatable.get("cpu", "0"))),
                    int(str(allocatable.get("pods", "110"))),
                    labels.get(RACK, ""),
                    labels,
                ),
            )

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
            for domain in topology.domains:
                host = domain.values[-1]
                node = self._nodes.get(host)
                if node is None:
                    self._load_nodes(core)
                    node = self._nodes.get(host)
                if node is None:
                    self.result.violate(f"{key}: assigned to node {host}, which does not exist")
                    continue
                if any(node.labels.get(k) != v for k, v in FLAVOR_LABELS.items()):
                    self.result.violate(f"{key}: node {host} is not a node of the flavor")
                racks[node.rack] = racks.get(node.rack, 0) + domain.count
                held.append((host, cpu * domain.count, domain.count))
            if request.get("required") and len(racks) > 1:
                self.result.violate(f"{key}: required rack, placed in racks {sorted(racks)}")
            size = int(request.get("podSetSliceSize") or 1)
            if size > 1 and any(n % size for n in racks.values()):
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
                    f"{key}: node {host} over its room: {node.used_cpu}m of {node.cpu}m cpu, "
                    f"{node.used_pods} of {node.pods} pods"
                )
            self.result.peak_node_cpu_pct = max(self.result.peak_node_cpu_pct, 100 * node.used_cpu / node.cpu)
            self.result.peak_node_pods = max(self.result.peak_node_pods, node.used_pods)

    def _release(self, key: str) -> None:
        for host, cpu, pods in self._held.pop(key, ()):
            node = self._nodes[host]
            node.used_cpu -= cpu
            node.used_pods -= pods


def _key(workload: Mapping[str, Any]) -> str:
    return f"{workload['metadata'].get('namespace')}/{workload['metadata']['name']}"
