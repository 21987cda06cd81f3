"""The integration record: the one interface every queued kind implements, and the helpers
the kinds share. A record is the only place a kind is declared (its API resource, the owners it
is accounted through, how its pods are found, its demand, its gate, its change filter, its RBAC
grants); `objects`, `setup`, `event_filters`, the webhooks, `permissions` and the CLI views read
them from the registry (`adapters/__init__.py`). Records are pure: they return edited copies,
never write, never call the engine."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rayquota.operator.core.pods import pod_finished
from rayquota.operator.core.resources import Resource
from rayquota.operator.queue import placement
from rayquota.operator.queue.adapters.multicluster import MultiClusterPart
from rayquota.operator.queue.coverage import PartAllocation, allocate
from rayquota.operator.queue.driver import AdmittedSlice
from rayquota.operator.queue.podsets import Demand, GroupKey, Role, group_key_of_pod
from rayquota.operator.ray import labels
from rayquota.queueing import ResourceFlavor

Body = Mapping[str, Any]


@dataclass(frozen=True)
class Edit:
    """The whole new body of one object (it carries the resourceVersion it was made from), or,
    with ``status_patch``, a merge patch of its status subresource (``body["status"]``)."""

    kind: str
    body: dict[str, Any]
    status_patch: bool = False


@dataclass(frozen=True)
class SuspendGate:
    """Where a kind's gate lives: a boolean at ``path`` in its body (a JSON pointer's steps).
    The mutating webhook sets it on CREATE when the object under ``path[:-1]`` exists; the
    validating webhook refuses an UPDATE that clears it before admission, or at all when
    ``cleared_by_queue_only`` (the gate stays set for good and the queue lifts it elsewhere)."""

    path: tuple[str, ...]
    cleared_by_queue_only: bool = False

    def is_set(self, obj: Body) -> bool:
        node: Any = obj
        for step in self.path:
            node = node.get(step) if isinstance(node, Mapping) else None
        return bool(node)

    def set_patch(self, obj: Body) -> dict[str, Any] | None:
        """The JSON patch operation that sets the gate, or None where its parent is absent."""
        node: Any = obj
        for step in self.path[:-1]:
            node = node.get(step) if isinstance(node, Mapping) else None
            if node is None:
                return None
        return {"op": "add", "path": "/" + "/".join(self.path), "value": True}

    @property
    def field(self) -> str:
        return ".".join(self.path)


# What the Job controller labels its pods with (the newer key, and the older one).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME_LABEL = "job-name"


@dataclass(frozen=True)
class PodWatch:
    """One filtered pod informer a kind finds its pods in: pods carrying ``selector``'s label,
    indexed by ``namespace/<value>`` of the first of ``index_labels`` they carry. The value names
    an object of ``owner_kind`` (a RayCluster, a RayJob through its submitter Job, a Job)."""

    name: str
    selector: str
    index_labels: tuple[str, ...]
    owner_kind: str

    def matches(self, pod: Mapping[str, Any]) -> bool:
        """Does the pod carry the labels ``selector`` asks for ("key" or "key=value" terms)?"""
        pod_labels = pod["metadata"].get("labels") or {}
        for term in self.selector.split(","):
            key, equals, value = term.partition("=")
            if key not in pod_labels or (equals and pod_labels[key] != value):
                return False
        return True

    def index(self, pod: Mapping[str, Any]) -> list[str]:
        pod_labels = pod["metadata"].get("labels") or {}
        for key in self.index_labels:
            value = pod_labels.get(key)
            if value:
                return [f"{pod['metadata']['namespace']}/{value}"]
        return []


# The pods of RayClusters (the RayCluster reconciler's informer too: one watch).
RAY_CLUSTER_PODS = PodWatch("ray-cluster", labels.RAY_CLUSTER, (labels.RAY_CLUSTER,), "RayCluster")


class PodLookup(Protocol):
    def pods(self, watch: PodWatch, namespace: str, value: str) -> list[Any]:
        """The pods ``watch`` indexes under ``namespace/value`` (``value`` made a label value)."""
        ...


@dataclass(frozen=True)
class TemplateAt:
    """A pod template of an object, the field it is at, and how many hosts each pod spans."""

    path: str
    template: Mapping[str, Any]
    hosts: int = 1


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


# A grant: verbs (space-separated) on a resource, or on its subresource ("status").
Grant = tuple[Resource, str] | tuple[Resource, str, str]
ChangeFilter = Callable[[str, Mapping[str, Any], Mapping[str, Any] | None], bool]


class KindAdapter(Protocol):
    """The integration record of one queued kind (read-only members: class attributes)."""

    kind: str

    @property
    def resource(self) -> Resource: ...

    @property
    def accounted_through(self) -> tuple[str, ...]:
        """Controller-owner kinds whose objects of this kind are accounted through the owner (a
        child RayCluster, a RayJob's submitter Job): never queued on their own."""
        ...

    @property
    def child_kind(self) -> str | None:
        """The kind of the children this kind is accounted with (its parts), if any."""
        ...

    @property
    def gate(self) -> SuspendGate: ...

    @property
    def children_held_at_pods(self) -> bool:
        """Are its children's pods held by a scheduling gate (beside KubeRay's operator) rather
        than its children by their ``spec.suspend``?"""
        ...

    @property
    def pod_watches(self) -> tuple[PodWatch, ...]: ...

    @property
    def change_filter(self) -> ChangeFilter | None:
        """Which watch events can change what the Workload reconciler decides (None: all)."""
        ...

    @property
    def grants(self) -> tuple[Grant, ...]:
        """What the queue integration writes on objects of this kind (the gate, the placement)."""
        ...

    @property
    def multicluster(self) -> MultiClusterPart | None:
        """How the kind is dispatched to a worker cluster by MultiKueue (None: it is not)."""
        ...

    def pod_templates(self, obj: Body) -> list[TemplateAt]:
        """The pod templates its topology requests are read from (Kueue's annotations), with
        the field each is at, for errors that name it."""
        ...

    def creation_refusal(self, obj: Body, queue: str) -> str | None:
        """Why an object of this kind cannot be queued as written (refused at creation, naming
        the field and the value), or None."""
        ...

    def pods_by_part(
        self, pods: PodLookup, obj: Body, children: Sequence[Body], known: Sequence[str]
    ) -> dict[str, list[Any]]:
        """The pods of each part, from the pod watches. ``known``: parts seen earlier whose pods
        may outlive them."""
        ...

    def group_of_pod(self, pod: Body) -> GroupKey:
        """Which group of its part a pod counts in (``Demand.pod_set_of``'s keys)."""
        ...

    def pod_sets(self, obj: Body, children: Sequence[Body]) -> Demand: ...

    def running_parts(self, obj: Body, children: Sequence[Body]) -> set[str]: ...

    def is_suspended(self, obj: Body) -> bool: ...

    def suspend(self, obj: Body, children: Sequence[Body]) -> list[Edit]: ...

    def run_with(
        self,
        obj: Body,
        children: Sequence[Body],
        admission: AdmittedSlice,
        flavors: Mapping[str, ResourceFlavor],
    ) -> list[Edit]:
        """Inject each admitted flavor's placement; lift the gate of the parts the slice covers."""
        ...

    def restore(self, obj: Body, children: Sequence[Body]) -> list[Edit]: ...

    def finished(self, obj: Body) -> bool: ...

    def pods_gone(self, obj: Body, pods: Sequence[Body]) -> bool: ...


# --- shared helpers ---------------------------------------------------------------------------


def edited(obj: Body) -> dict[str, Any]:
    return copy.deepcopy(dict(obj))


def changed(kind: str, before: Body, after: dict[str, Any]) -> list[Edit]:
    return [] if after == before else [Edit(kind, after)]


def allocation_of(
    adapter: KindAdapter, obj: Body, children: Sequence[Body], admission: AdmittedSlice | None
) -> tuple[Demand, dict[str, PartAllocation]]:
    demand = adapter.pod_sets(obj, children)
    admitted = admission.counts() if admission is not None else None
    return demand, allocate(demand, admitted, adapter.running_parts(obj, children))


def placements(admission: AdmittedSlice, flavors: Mapping[str, ResourceFlavor]) -> dict[str, dict[str, Any]]:
    """pod set name -> the nodeSelector/tolerations of the flavors it was admitted to."""
    return {
        ps.name: placement.flavor_placement(
            flavors[f] for f in sorted(set(ps.flavors.values())) if f in flavors
        )
        for ps in admission.pod_sets
    }


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


def spec_suspended(obj: Body) -> bool:
    return bool((obj.get("spec") or {}).get("suspend"))


def set_spec_suspend(kind: str, obj: Body) -> list[Edit]:
    """The gate of a RayJob and of a standalone RayCluster: ``spec.suspend``."""
    after = edited(obj)
    after["spec"]["suspend"] = True
    return changed(kind, obj, after)


def gate_cleared_by_hand(obj: Mapping[str, Any]) -> bool:
    """Was the gate of this unadmitted, ungated object cleared by someone? An object still at
    its first generation is as its author created it: written without ``suspend`` (no webhook set
    it), it is gated quietly. Any later spec change since means someone (after the queue or a
    webhook had set the gate) cleared it."""
    return int(obj["metadata"].get("generation") or 1) > 1


def no_pods_hold_quota(pods: Sequence[Body]) -> bool:
    """Finished pods release their node's resources; any other pod (terminating too) holds them."""
    return all(pod_finished(p) for p in pods)


class SpecSuspendKind:
    """A kind gated by its own top-level ``spec.suspend`` (RayJob, RayCluster, Job): whose quota
    is free once none of its pods hold any."""

    kind: str
    gate = SuspendGate(("spec", "suspend"))

    def is_suspended(self, obj: Body) -> bool:
        return self.gate.is_set(obj)

    def suspend(self, obj: Body, children: Sequence[Body]) -> list[Edit]:
        return set_spec_suspend(self.kind, obj)

    def pods_gone(self, obj: Body, pods: Sequence[Body]) -> bool:
        return no_pods_hold_quota(pods)


class RayKind:
    """What the Ray kinds share: their pods are found by their clusters' names (the
    ``ray.io/cluster`` label) and counted in groups by the Ray labels."""

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
