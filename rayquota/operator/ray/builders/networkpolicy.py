"""``spec.networkPolicy`` on a RayCluster: the NetworkPolicies KubeRay v1.7.0 makes with its
RayClusterNetworkPolicy feature gate on (its ``networkpolicy_controller.go``; facts only).

One policy for the head (``<cluster>-head``) and one per worker group (``<cluster>-workers-<group>``),
owned by the cluster (controller reference), labelled ``ray.io/cluster``, ``ray.io/group`` and
KubeRay's ``app.kubernetes.io`` pair. ``mode`` (default ``DenyAll``) says which directions are
closed: a closed direction gets its policy type and the base rule (every pod of the same cluster,
all ports), then the user's rules for that pod (``head``; a ``workerGroups`` entry, else
``worker``). The head of a cluster a K8sJobMode RayJob owns also lets that RayJob's submitter
reach the dashboard port. DNS egress is not added: as in KubeRay, the user's egress rules carry it.

A policy of the same name not owned by the cluster is left alone and reported; policies of worker
groups removed from the spec, or all of them once ``networkPolicy`` is removed, are deleted. The
controller runs only with the gate on; with it off the field is refused (security_fields).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

from rayquota.operator.core import Manager, ObjectKey, Result, owner_uids, resources
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.core.resources import Resource
from rayquota.operator.kube import ApiError, Conflict
from rayquota.operator.ray.vocabulary import labels

log = logging.getLogger(__name__)

NETWORK_POLICIES = Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy")
GATE = "RayClusterNetworkPolicy"
DENY_ALL, DENY_ALL_INGRESS, DENY_ALL_EGRESS = "DenyAll", "DenyAllIngress", "DenyAllEgress"
DEFAULT_DASHBOARD_PORT = 8265
K8S_JOB_MODE = "K8sJobMode"


def head_policy_name(cluster_name: str) -> str:
    return f"{cluster_name}-head"


def worker_policy_name(cluster_name: str, group: str) -> str:
    return f"{cluster_name}-workers-{group}"


def _same_cluster(cluster_name: str) -> dict[str, Any]:
    return {"podSelector": {"matchLabels": {labels.RAY_CLUSTER: cluster_name}}}


def _dashboard_port(cluster: Mapping[str, Any]) -> int:
    """The head's ``dashboard-port`` start parameter when it is a number, else 8265 (KubeRay's
    rule here: the container's port list is not read)."""
    params = ((cluster.get("spec") or {}).get("headGroupSpec") or {}).get("rayStartParams") or {}
    try:
        return int(str(params.get("dashboard-port")))
    except ValueError:
        return DEFAULT_DASHBOARD_PORT


def _submitter_peer(cluster: Mapping[str, Any]) -> dict[str, Any] | None:
    """The submitter pods of the K8sJobMode RayJob that controls this cluster, if any."""
    meta = cluster["metadata"]
    if (meta.get("labels") or {}).get(labels.RAY_JOB_SUBMISSION_MODE) != K8S_JOB_MODE:
        return None
    for ref in meta.get("ownerReferences") or []:
        if (
            ref.get("kind") == "RayJob"
            and ref.get("controller")
            and str(ref.get("apiVersion")).startswith("ray.io/")
        ):
            selector = {labels.ORIGINATED_FROM_CR_NAME: ref["name"], labels.ORIGINATED_FROM_CRD: "RayJob"}
            return {"podSelector": {"matchLabels": selector}}
    return None


def _user_rules(config: Mapping[str, Any], group: str | None) -> Mapping[str, Any]:
    """The head's rules (``group`` None), else the group's entry, else ``worker``."""
    if group is None:
        return config.get("head") or {}
    for entry in config.get("workerGroups") or []:
        if entry.get("groupName") == group:
            return dict(entry)
    return config.get("worker") or {}


def _policy(cluster: Mapping[str, Any], group: str | None) -> dict[str, Any]:
    meta = cluster["metadata"]
    name = str(meta["name"])
    config = (cluster.get("spec") or {}).get("networkPolicy") or {}
    mode = config.get("mode") or DENY_ALL
    rules = _user_rules(config, group)
    spec: dict[str, Any] = {"policyTypes": []}
    if mode in (DENY_ALL, DENY_ALL_INGRESS):
        spec["policyTypes"].append("Ingress")
        ingress = [{"from": [_same_cluster(name)]}]
        peer = _submitter_peer(cluster) if group is None else None
        if peer is not None:
            port = {"protocol": "TCP", "port": _dashboard_port(cluster)}
            ingress.append({"from": [peer], "ports": [port]})
        spec["ingress"] = ingress + copy.deepcopy(list(rules.get("ingressRules") or []))
    if mode in (DENY_ALL, DENY_ALL_EGRESS):
        spec["policyTypes"].append("Egress")
        spec["egress"] = [{"to": [_same_cluster(name)]}, *copy.deepcopy(list(rules.get("egressRules") or []))]
    if group is None:
        selector = {labels.RAY_CLUSTER: name, labels.RAY_NODE_TYPE: labels.HEAD_NODE}
        policy_name, group_label = head_policy_name(name), labels.HEAD_GROUP_NAME
    else:
        selector = {
            labels.RAY_CLUSTER: name,
            labels.RAY_NODE_TYPE: labels.WORKER_NODE,
            labels.RAY_GROUP: group,
        }
        policy_name, group_label = worker_policy_name(name, group), group
    spec["podSelector"] = {"matchLabels": selector}
    return {
        "apiVersion": NETWORK_POLICIES.api_version,
        "kind": NETWORK_POLICIES.kind,
        "metadata": {
            "name": policy_name,
            "namespace": meta["namespace"],
            "labels": {
                labels.RAY_CLUSTER: name,
                labels.RAY_GROUP: group_label,
                labels.APP_NAME: labels.APP_NAME_VALUE,
                labels.CREATED_BY: labels.KUBERAY_CREATED_BY_VALUE,
            },
            "ownerReferences": [labels.owner_reference(cluster)],
        },
        "spec": spec,
    }


def wanted_policies(cluster: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The head's policy, then one per worker group; none without ``spec.networkPolicy``."""
    spec = cluster.get("spec") or {}
    if spec.get("networkPolicy") is None:
        return []
    groups = [str(g.get("groupName")) for g in spec.get("workerGroupSpecs") or []]
    return [_policy(cluster, None), *(_policy(cluster, group) for group in groups)]


def comparable(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A policy spec as the API server stores it: ports default to TCP, empty lists dropped."""
    out = copy.deepcopy(dict(spec))
    for direction in ("ingress", "egress"):
        for rule in out.get(direction) or []:
            for port in rule.get("ports") or []:
                port.setdefault("protocol", "TCP")
    return {key: value for key, value in out.items() if value not in (None, [], {})}


def _owning_cluster(obj: Mapping[str, Any]) -> list[ObjectKey]:
    name = (obj["metadata"].get("labels") or {}).get(labels.RAY_CLUSTER)
    return [ObjectKey(str(obj["metadata"].get("namespace") or ""), str(name))] if name else []


class NetworkPolicyReconciler:
    """A controller of its own, as in KubeRay: RayClusters in, their NetworkPolicies kept."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.client = manager.client
        self.clusters = manager.informer(resources.RAYCLUSTERS)
        self.policies = manager.informer(NETWORK_POLICIES, label_selector=labels.RAY_CLUSTER)
        self.controller = manager.controller("networkpolicy", self.reconcile)
        self.controller.watch(self.clusters)
        self.controller.watch(self.policies, _owning_cluster)

    async def reconcile(self, key: ObjectKey) -> Result | None:
        cluster = self.clusters.store.get_key(key)
        if cluster is None or cluster["metadata"].get("deletionTimestamp"):
            return None  # the garbage collector removes the owned policies
        if labels.managed_by_other_controller(cluster):
            return None
        wanted = wanted_policies(cluster)
        for policy in wanted:
            await self._ensure(cluster, policy)
        keep = {p["metadata"]["name"] for p in wanted}
        for live in self.policies.store.list(key.namespace):
            meta = live["metadata"]
            if (meta.get("labels") or {}).get(labels.RAY_CLUSTER) != key.name or meta["name"] in keep:
                continue
            owned = cluster["metadata"]["uid"] in owner_uids(live)
            if owned and await self.client.delete(NETWORK_POLICIES.path(key.namespace, meta["name"])):
                self._event(
                    cluster, "Normal", "DeletedNetworkPolicy", f"Deleted NetworkPolicy {meta['name']}"
                )
        return None

    async def _ensure(self, cluster: Obj, wanted: dict[str, Any]) -> None:
        meta = wanted["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        live = self.policies.store.get(namespace, name) or await self.client.get(
            NETWORK_POLICIES.path(namespace, name)
        )
        if live is None:
            try:
                await self.client.create(NETWORK_POLICIES.path(namespace), wanted)
            except Conflict:
                return  # made meanwhile: its watch event brings the cluster back
            except ApiError as exc:
                self._event(cluster, "Warning", "FailedToCreateNetworkPolicy", f"{name}: {exc.message}")
                raise
            self._event(
                cluster, "Normal", "CreatedNetworkPolicy", f"Created NetworkPolicy {namespace}/{name}"
            )
            return
        if cluster["metadata"]["uid"] not in owner_uids(live):
            message = (
                f"NetworkPolicy {namespace}/{name} already exists and is not owned by this RayCluster: "
                "network isolation is not applied; rename it or the RayCluster"
            )
            self._event(cluster, "Warning", "NetworkPolicyNameCollision", message)
            raise RuntimeError(message)
        same_spec = comparable(live.get("spec") or {}) == comparable(wanted["spec"])
        if same_spec and (live["metadata"].get("labels") or {}) == meta["labels"]:
            return
        updated = copy.deepcopy(dict(live))
        updated["spec"] = wanted["spec"]
        updated["metadata"]["labels"] = meta["labels"]
        try:
            await self.client.replace(NETWORK_POLICIES.path(namespace, name), updated)
        except ApiError as exc:
            self._event(cluster, "Warning", "FailedToUpdateNetworkPolicy", f"{name}: {exc.message}")
            raise
        self._event(cluster, "Normal", "UpdatedNetworkPolicy", f"Updated NetworkPolicy {namespace}/{name}")

    def _event(self, cluster: Obj, kind: str, reason: str, message: str) -> None:
        self.manager.recorder.post(cluster, kind, reason, message)
