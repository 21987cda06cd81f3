"""The admission gate: the one question every controller asks before it creates something that
runs on quota (a child RayCluster, a submitter Job, a pod), and the queue's verdict on a Ray
object, for its status.

The rule it enforces: for a queued object, nothing is created until its Workload is admitted
for that part *and* the admission's edits (the flavor's nodeSelector and tolerations) are in
the spec the builder reads; until then the object behaves as suspended, whatever its own
``suspend`` says. The queue integration installs its own gate; without one nothing is gated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Placement:
    """The nodeSelector and tolerations a pod must carry to run on the flavor it was admitted to."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()

    def missing_from(self, pod_spec: Mapping[str, Any]) -> list[str]:
        """What ``pod_spec`` (a pod's or a pod template's spec) lacks of this placement."""
        selector = pod_spec.get("nodeSelector") or {}
        missing = [f"nodeSelector {k}={v}" for k, v in self.node_selector.items() if selector.get(k) != v]
        tolerations = pod_spec.get("tolerations") or []
        missing += [f"toleration {_describe(t)}" for t in self.tolerations if dict(t) not in tolerations]
        return missing

    def carried_by(self, pod_spec: Mapping[str, Any]) -> bool:
        return not self.missing_from(pod_spec)


def _describe(toleration: Mapping[str, Any]) -> str:
    key, value, effect = toleration.get("key", "*"), toleration.get("value"), toleration.get("effect")
    text = f"{key}={value}" if value else f"{key} ({toleration.get('operator', 'Equal')})"
    return f"{text}:{effect}" if effect else text


ANYWHERE = Placement()


QUOTA_RESERVED = "QuotaReserved"
"""The condition type the Ray objects carry while they are queued."""


@dataclass(frozen=True)
class QueueCondition:
    """The queue's verdict on one queued Ray object, as its ``QuotaReserved`` condition says it.

    It is computed by the Ray reconcilers' own status functions (never written beside them),
    so their exact status writes keep it instead of erasing it."""

    admitted: bool
    reason: str  # Admitted | Pending
    message: str
    slice_waiting: bool = False  # admitted, and a scale-up slice waits for quota
    # False until the engine has given its first verdict (the Workload may not even exist yet).
    evaluated: bool = True


@dataclass(frozen=True)
class GateVerdict:
    """May a part of a queued object run (have its children, submitter and pods created)?

    ``admitted``: its Workload's recorded admission covers the part; ``placed``: the admitted
    placement is in the templates the builders read. Only both open the gate."""

    admitted: bool
    placed: bool
    reason: str  # a CamelCase word for a status reason
    message: str

    @property
    def open(self) -> bool:
        return self.admitted and self.placed


class AdmissionGate(Protocol):
    """The generic gate every kind's controller asks. (What a RayCluster's pods may be is the
    Ray kinds' own port: ``ray.raycluster.admitted_caps``.)"""

    def may_run(self, kind: str, obj: Mapping[str, Any], part: str | None = None) -> GateVerdict | None:
        """May ``part`` of a queued object (a child cluster's name; None: the object as a whole)
        be created and run? None when the object is not queued."""
        ...

    def queue_condition(self, kind: str, obj: Mapping[str, Any]) -> QueueCondition | None:
        """None when the object is not queued (a child cluster is accounted through its parent)."""
        ...


class NoGate:
    def may_run(self, kind: str, obj: Mapping[str, Any], part: str | None = None) -> GateVerdict | None:
        return None

    def queue_condition(self, kind: str, obj: Mapping[str, Any]) -> QueueCondition | None:
        return None
