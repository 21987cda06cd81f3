"""The integration record: the one interface every queued kind implements (`KindAdapter`) and
the types it names. A record is the only place a kind is declared (its API resource, the owners it
is accounted through, how its pods are found, its demand, its gate, its change filter, its RBAC
grants); `objects`, `setup`, `event_filters`, the webhooks, `permissions` and the CLI views read
them from the registry (`adapters/__init__.py`). What only some kinds can do is in
`capabilities.py`; the helpers records share are in `record_helpers.py` (every kind),
`ray_kind.py` (the Ray kinds) and `job_labels.py`. Records are pure: they return edited copies,
never write, never call the engine."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rayquota.operator.core.resources import Resource
from rayquota.operator.queue.adapters.multicluster import MultiClusterPart
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.demand.podsets import Demand, GroupKey
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
        value = self.owner_by_label(pod)
        return [] if value is None else [f"{pod['metadata']['namespace']}/{value}"]

    def owner_by_label(self, pod: Mapping[str, Any]) -> str | None:
        """The value of the first of ``index_labels`` the pod carries (not empty), if any."""
        pod_labels = pod["metadata"].get("labels") or {}
        for key in self.index_labels:
            value = pod_labels.get(key)
            if value:
                return str(value)
        return None

    def owner_by_reference(self, pod: Mapping[str, Any]) -> str | None:
        """The name of the pod's controller owner of ``owner_kind``, if it has one."""
        for ref in pod["metadata"].get("ownerReferences") or ():
            if ref.get("controller") and ref.get("kind") == self.owner_kind:
                return str(ref["name"])
        return None


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
