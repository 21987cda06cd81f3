"""What the Ray kinds' records share: the cluster pod watch, the group a pod counts in, a
RayCluster spec's pod templates (read, placed, restored), and `RayKind`, the base of the
RayCluster, RayJob and RayService records."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from rayquota.operator.queue.adapters.protocol import (
    Body,
    PodLookup,
    PodWatch,
    TemplateAt,
)
from rayquota.operator.queue.adapters.record_helpers import CountsClaims
from rayquota.operator.queue.demand.podsets import GroupKey, Role
from rayquota.operator.queue.gating import placement
from rayquota.operator.ray.raycluster.redis_cleanup import REDIS_CLEANUP_NODE_TYPE
from rayquota.operator.ray.vocabulary import labels

# The pods of RayClusters (the RayCluster reconciler's informer too: one watch).
RAY_CLUSTER_PODS = PodWatch("ray-cluster", labels.RAY_CLUSTER, (labels.RAY_CLUSTER,), "RayCluster")


def group_key_of_pod(pod: Mapping[str, Any]) -> GroupKey:
    """The group a Ray kind's pod counts in, by KubeRay's labels: a submitter's, the head's (the
    Redis cleanup Job's pod too: it runs on the head's quota once the head is gone), or its
    worker group's."""
    pod_labels = pod["metadata"].get("labels") or {}
    if pod_labels.get(labels.RAY_JOB_SUBMITTER) == "true":
        return (Role.SUBMITTER, "")
    if pod_labels.get(labels.RAY_NODE_TYPE) in (labels.HEAD_NODE, REDIS_CLEANUP_NODE_TYPE):
        return (Role.HEAD, "")
    return (Role.WORKER, str(pod_labels.get(labels.RAY_GROUP, "")))


def cluster_spec_templates(path: str, cluster_spec: Mapping[str, Any]) -> list[TemplateAt]:
    """The head's and each worker group's pod template of a RayCluster spec at ``path``."""
    head = (cluster_spec.get("headGroupSpec") or {}).get("template") or {}
    out = [TemplateAt(f"{path}.headGroupSpec.template", head)]
    for index, group in enumerate(cluster_spec.get("workerGroupSpecs") or ()):
        out.append(
            TemplateAt(
                f"{path}.workerGroupSpecs[{index}].template",
                group.get("template") or {},
                int(group.get("numOfHosts") or 1),
            )
        )
    return out


def cluster_templates(
    cluster_spec: MutableMapping[str, Any],
) -> list[tuple[GroupKey, MutableMapping[str, Any]]]:
    """Every pod template of a RayCluster spec with the group its pods belong to."""
    out: list[tuple[GroupKey, MutableMapping[str, Any]]] = []
    head = cluster_spec.get("headGroupSpec") or {}
    if "template" in head:
        out.append(((Role.HEAD, ""), head["template"]))
    for group in cluster_spec.get("workerGroupSpecs") or []:
        if "template" in group:
            out.append(((Role.WORKER, str(group.get("groupName") or "")), group["template"]))
    return out


def inject_cluster(
    cluster_spec: MutableMapping[str, Any], pod_set_of: Mapping[GroupKey, str], by_pod_set: Mapping[str, Any]
) -> None:
    for key, template in cluster_templates(cluster_spec):
        name = pod_set_of.get(key)
        if name is not None and name in by_pod_set:
            placement.inject(template, by_pod_set[name])


def restore_cluster(cluster_spec: MutableMapping[str, Any]) -> None:
    for _, template in cluster_templates(cluster_spec):
        placement.restore(template)


class RayKind(CountsClaims):
    """What the Ray kinds share: their pods are found by their clusters' names (the
    ``ray.io/cluster`` label) and counted in groups by the Ray labels; their demand counts the
    claims ``CountsClaims`` reads."""

    accounted_through: tuple[str, ...] = ()
    child_kind: str | None = "RayCluster"
    pod_watches: tuple[PodWatch, ...] = (RAY_CLUSTER_PODS,)
    children_held_at_pods = False

    def creation_refusal(self, obj: Body, queue: str) -> str | None:
        return None

    def group_of_pod(self, pod: Body) -> GroupKey:
        return group_key_of_pod(pod)

    def cluster_names(self, obj: Body, children: Sequence[Body]) -> list[str]:
        return [str(c["metadata"]["name"]) for c in children]

    def pods_by_part(
        self, pods: PodLookup, obj: Body, children: Sequence[Body], known: Sequence[str]
    ) -> dict[str, list[Any]]:
        namespace = str(obj["metadata"]["namespace"])
        names = self.cluster_names(obj, children)
        names += [name for name in known if name not in names]
        return {name: pods.pods(RAY_CLUSTER_PODS, namespace, name) for name in names}
