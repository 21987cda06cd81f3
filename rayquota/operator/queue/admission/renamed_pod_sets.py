"""An admitted pod set whose name changed under running pods: its admission carried over.

A RayService's pod sets are named after their group and a digest of their shape
(``adapters/rayservice.py``). When the digest rule changes (an operator upgrade that adds a
field to ``demand.podsets.shape_key``, say), the pods that already run under an admitted pod
set ``gpu-1a2b3`` are counted under ``gpu-4c5d6`` from then on. The recorded admission still
names the old pod set, the new one is not admitted, and, taken as written, the running pods
would hold no admitted quota: the old pod set would shrink to nothing (its quota given to
another workload), the new one would be admitted anew (perhaps on another flavor), and the
gate would cap the running pods at nothing in between.

Here the admission is carried over instead: an admitted pod set the demand no longer names
passes its flavors and pods to a pod set of the demand the admission does not name when they
are the same pods seen under a new name: the same group (the name without its shape digest)
and the same requests per pod. Nothing is admitted anew: the carried pod set counts at most
what the old one admitted, on the same flavors, so the usage does not change.

Pure: an admission and pod set names, counts and requests in; the carried-over admission out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from rayquota.operator.queue.admission.admitted_slice import AdmittedSlice
from rayquota.queueing import PodSetAssignment

# The ``pods`` resource is counted per pod by the engine when a ClusterQueue covers it; a
# pod set's requests never name it.
PODS_RESOURCE = "pods"
_SHAPE_DIGEST = re.compile(r"^(?P<stem>.+)-[0-9a-f]{5}$")


class NamedPodSet(Protocol):
    """What a pod set of the demand must say: its name, pod count and requests per pod (a
    queue ``PodSet`` or a ``PodSetDemand``)."""

    @property
    def name(self) -> str: ...

    @property
    def count(self) -> int: ...

    @property
    def requests(self) -> Mapping[str, int]: ...


@dataclass(frozen=True)
class Rename:
    """``count`` pods admitted under ``old`` are counted under ``new`` now."""

    old: str
    new: str
    count: int


def stem(name: str) -> str:
    """The pod set's group: its name without a trailing shape digest (``-`` and five hex digits)."""
    match = _SHAPE_DIGEST.match(name)
    return match.group("stem") if match else name


def per_pod_usage(assignment: PodSetAssignment) -> dict[str, int]:
    """What one admitted pod of the pod set holds, per resource (the ``pods`` resource left out)."""
    if not assignment.count:
        return {}
    return {r: q // assignment.count for r, q in assignment.usage.items() if r != PODS_RESOURCE}


def same_pods(assignment: PodSetAssignment, pod_set: NamedPodSet) -> bool:
    """Could the admitted pods of ``assignment`` be the pods ``pod_set`` counts: the same group,
    and every resource the admission holds asked for in the same amount per pod?"""
    if stem(assignment.name) != stem(pod_set.name) or assignment.name == pod_set.name:
        return False
    held = per_pod_usage(assignment)
    return all(pod_set.requests.get(r, 0) == q for r, q in held.items())


def renames(admission: AdmittedSlice, pod_sets: Sequence[NamedPodSet]) -> list[Rename]:
    """Which admitted pods now count under another pod set's name, in the demand's order.

    Only between an admitted pod set the demand no longer names and a pod set of the demand the
    admission does not name; each new pod set takes at most its own count, and an old one gives
    at most what it admitted (one old pod set may feed several new ones: a merge split apart).
    A pod set placed in topology domains moves only whole (its domains are per pod set)."""
    wanted = {ps.name for ps in pod_sets}
    admitted = {ps.name for ps in admission.pod_sets}
    left = {ps.name: ps.count for ps in admission.pod_sets if ps.name not in wanted and ps.count}
    out: list[Rename] = []
    for pod_set in pod_sets:
        if pod_set.name in admitted or not pod_set.count:
            continue
        need = pod_set.count
        for old in admission.pod_sets:
            if need == 0:
                break
            have = left.get(old.name, 0)
            if not have or not same_pods(old, pod_set):
                continue
            if old.topology is not None and need < have:
                continue
            moved = min(need, have)
            out.append(Rename(old.name, pod_set.name, moved))
            left[old.name] = have - moved
            need -= moved
    return out


def carried_over(
    admission: AdmittedSlice, pod_sets: Sequence[NamedPodSet], moves: Sequence[Rename] | None = None
) -> AdmittedSlice:
    """The admission with the pods of renamed pod sets admitted under their new names (same
    flavors, same usage per pod); the admission itself when nothing was renamed. ``moves``:
    the :func:`renames` already found for these two."""
    moves = renames(admission, pod_sets) if moves is None else moves
    if not moves:
        return admission
    by_name = {ps.name: ps for ps in admission.pod_sets}
    moved_out: dict[str, int] = {}
    added: list[PodSetAssignment] = []
    for move in moves:
        old = by_name[move.old]
        moved_out[move.old] = moved_out.get(move.old, 0) + move.count
        added.append(_resized(replace(old, name=move.new), move.count))
    kept = [
        _resized(ps, ps.count - moved_out.get(ps.name, 0))
        for ps in admission.pod_sets
        if ps.count - moved_out.get(ps.name, 0) > 0
    ]
    return replace(admission, pod_sets=tuple(kept + added))


def carried_counts(counts: Mapping[str, int], moves: Sequence[Rename]) -> dict[str, int]:
    """Per pod set counts (the engine's, say) with the same renames applied, where they still
    name the old pod set."""
    out = dict(counts)
    for move in moves:
        if move.new in counts or out.get(move.old, 0) <= 0:
            continue
        moved = min(move.count, out[move.old])
        out[move.old] -= moved
        out[move.new] = out.get(move.new, 0) + moved
    return out


def _resized(assignment: PodSetAssignment, count: int) -> PodSetAssignment:
    if count == assignment.count:
        return assignment
    per_pod = {r: q // assignment.count for r, q in assignment.usage.items()} if assignment.count else {}
    return replace(assignment, count=count, usage={r: q * count for r, q in per_pod.items()})
