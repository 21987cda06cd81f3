"""Helpers every integration record may use: edited copies and their edits, the allocation of an
admitted slice over a record's parts, the placements per pod set, the `spec.suspend` gate
(`SpecSuspendKind`) and the claim source its demand read is given (`CountsClaims`)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.operator.core.pods import pod_finished
from rayquota.operator.queue.adapters.protocol import (
    Body,
    Edit,
    KindAdapter,
    PodLookup,
    PodWatch,
    SuspendGate,
)
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.demand.podsets import Demand
from rayquota.operator.queue.dra.context import ClaimReading, ClaimSource, reading_of
from rayquota.operator.queue.gating import placement
from rayquota.operator.queue.gating.coverage import PartAllocation, allocate
from rayquota.queueing import ResourceFlavor


def edited(obj: Body) -> dict[str, Any]:
    return copy.deepcopy(dict(obj))


def changed(kind: str, before: Body, after: dict[str, Any]) -> list[Edit]:
    return [] if after == before else [Edit(kind, after)]


def allocation_of(
    adapter: KindAdapter,
    obj: Body,
    children: Sequence[Body],
    admission: AdmittedSlice | None,
    *,
    demand: Demand | None = None,
) -> tuple[Demand, dict[str, PartAllocation]]:
    """The object's demand and its parts' shares of ``admission`` (taken as given: none for
    no admission), its running parts keeping theirs first. ``demand``: the one already read
    from these ``children`` (the gate names the admission after it first), else read here."""
    demand = adapter.pod_sets(obj, children) if demand is None else demand
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


class CountsClaims:
    """A record whose demand read counts the DRA claims (and the DeviceClass-backed extended
    resources) of the object's namespace, read from ``claims``: the operator's claim cache, which
    the queue's setup passes to every record (`adapters.registry`). Without one they count
    nothing."""

    def __init__(self, *, claims: ClaimSource | None = None) -> None:
        self.claims = claims

    def claim_reading(self, obj: Body) -> ClaimReading | None:
        return reading_of(self.claims, obj)


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


class RunsAsOnePart(SpecSuspendKind):
    """A kind with no child clusters (Job, JobSet): the object is its one part, running unless
    suspended, and its pods are those ``own_part_pods`` finds by its name."""

    own_part_pods: PodWatch

    def running_parts(self, obj: Body, children: Sequence[Body]) -> set[str]:
        return set() if self.is_suspended(obj) else {str(obj["metadata"]["name"])}

    def pods_by_part(
        self, pods: PodLookup, obj: Body, children: Sequence[Body], known: Sequence[str]
    ) -> dict[str, list[Any]]:
        meta = obj["metadata"]
        name = str(meta["name"])
        return {name: pods.pods(self.own_part_pods, str(meta["namespace"]), name)}
