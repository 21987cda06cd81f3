"""What a queued kind may do beyond the record every kind has (`protocol.KindAdapter`).

Each capability is a small protocol; a record has it when it defines its members, and generic
code asks with ``isinstance`` (never by the kind's name). A kind without one gets the plain
behaviour the caller documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from rayquota.operator.queue.adapters.protocol import PodWatch
from rayquota.operator.queue.demand.pod_set_words import OwnersInWords
from rayquota.operator.queue.demand.podsets import GroupKey
from rayquota.operator.ray.raycluster.admitted_caps import AdmittedCaps

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


@runtime_checkable
class PlansWithinCaps(Protocol):
    """Its objects plan their own pods within the caps the gate gives each (`QueueGate.caps_for`,
    which the RayCluster planner reads): a RayCluster, standalone or one of a RayJob's or
    RayService's parts. An UPDATE that clears the gate of a child of this kind (one accounted
    through its parent) is let through by the validating webhook only once its caps let it start.
    Without it, the webhook leaves a child's gate to its parent's record (a RayJob's submitter
    Job: its pods are held instead)."""

    def may_start(self, caps: AdmittedCaps) -> bool:
        """Do these caps let one of its objects start at all?"""
        ...


@runtime_checkable
class GatesItsOwnPods(Protocol):
    """Its admission writes rayquota's scheduling gate into its own pod template where its pods
    must be held (`run_with`: a batch/v1 Job given topology domains), so they are born held: the
    pod webhook leaves them be, and the ungater of ``own_pods`` lets them through keyed by the
    object itself. Without it, the held pods of a queued object are its children's (a RayJob's
    submitter Job: its template or the pod webhook holds them), keyed by those children."""

    @property
    def own_pods(self) -> PodWatch:
        """The pod watch its own pods are found in, under its name."""
        ...


@runtime_checkable
class StartsPodsThroughJobs(Protocol):
    """Its pods are made by the Jobs it controls, which another controller keeps in step with it
    (JobSet's controller suspends a JobSet's Jobs a moment after the queue suspends the JobSet):
    until each of them is stopped the Job controller may still start a pod, so the quota it held
    is free only once its Jobs are stopped and its pods are gone. Without it, its pods alone say."""

    def jobs_stopped(self, jobs: Sequence[Body]) -> bool:
        """Can none of these Jobs (those it controls) start a pod any more?"""
        ...


@runtime_checkable
class OptionalIntegration(Protocol):
    """Its kind is queued only when the configuration's ``integrations.frameworks`` is unset or
    names ``framework`` (Kueue's integration name), and its CRD is another project's: the
    operator starts without it (`Resource.optional`). Without it, a kind is always queued."""

    @property
    def framework(self) -> str:
        """Kueue's name for the integration (``jobset.x-k8s.io/jobset``)."""
        ...


__all__ = [
    "ChildrenMarkedByLabel",
    "ClustersCappedOneByOne",
    "GatesItsOwnPods",
    "OptionalIntegration",
    "OwnersInWords",
    "PartTemplates",
    "PlansWithinCaps",
    "RunsItsOwnCluster",
    "StartsPodsThroughJobs",
]
