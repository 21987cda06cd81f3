"""What a queued kind may do beyond the record every kind has (`protocol.KindAdapter`).

Each capability is a small protocol; a record has it when it defines its members, and generic
code asks with ``isinstance`` (never by the kind's name). A kind without one gets the plain
behaviour the caller documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from rayquota.operator.queue.demand.pod_set_words import OwnersInWords
from rayquota.operator.queue.demand.podsets import GroupKey

Body = Mapping[str, Any]


@runtime_checkable
class RunsItsOwnCluster(Protocol):
    """The object is itself the cluster its pods run in (a standalone RayCluster): the cluster
    reconciler reconciles it directly, and its name is one of its clusters'."""

    def own_cluster(self, obj: Body) -> str: ...


@runtime_checkable
class ClustersCappedOneByOne(Protocol):
    """Each of its clusters is capped alone (a RayJob: a retry's new cluster is planned within
    the slice by itself; the pods of the others count as held elsewhere). Without it, a cluster
    is capped within the allocation over all the object's clusters."""

    def capped_with(self, children: Sequence[Body], part: str) -> list[Body]: ...


@runtime_checkable
class PartTemplates(Protocol):
    """The pod templates the child builders read for one part, with the group each feeds: what
    the gate checks the admitted placement against before a part may run. Without it, no
    template is checked."""

    def part_templates(
        self, obj: Body, children: Sequence[Body], part: str
    ) -> list[tuple[GroupKey, Mapping[str, Any]]]: ...


@runtime_checkable
class ChildrenMarkedByLabel(Protocol):
    """Its children carry a label naming this kind (KubeRay's ``ray.io/originated-from-crd``):
    the webhooks select the children by it."""

    @property
    def child_marker(self) -> tuple[str, str]:
        """(label key, value) each child of this kind carries."""
        ...


__all__ = [
    "ChildrenMarkedByLabel",
    "ClustersCappedOneByOne",
    "OwnersInWords",
    "PartTemplates",
    "RunsItsOwnCluster",
]
