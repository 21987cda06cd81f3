"""Holding pods at their scheduling gate, for the clusters rayquota does not build itself.

Beside KubeRay's operator (admission-only mode), a RayService's children are not gated by a
``suspend`` field (KubeRay writes those from the RayService's own). Their pods are held
instead: the pod webhook adds :data:`SCHEDULING_GATE` to each at creation, so the scheduler
leaves them alone, and the pod ungater removes it, in the same write that adds the flavor's
nodeSelector and tolerations (Kubernetes lets a gated pod gain both), only for the pods the
recorded admission covers: per group at most the admitted count, never beyond the cluster's
admitted budget, and, where the admission assigned topology domains, each pod pinned to a
domain with room (as Kueue's topology ungater does). A gated pod is not scheduled, so it holds
nothing.

The pods of a batch/v1 Job are held the same way (:func:`pod_set_releases`): a queued Job
whose admission assigned topology domains gets the gate in its pod template (:func:`gate_template`,
written with the admission, while the Job is still suspended), and a RayJob's submitter Job,
whose template KubeRay's operator writes, gets it from the pod webhook. The ungater lets each
pod through pinned to a domain with room, at most as many per domain as assigned.

Pure functions: which pods to let through, and the JSON patches that do it.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from rayquota.operator.core.gate import ANYWHERE, Placement
from rayquota.operator.core.pods import pod_finished
from rayquota.operator.ray.builders.topology_pins import Domains, pins_for_new_pods
from rayquota.operator.ray.raycluster.admitted_caps import AdmittedCaps
from rayquota.operator.ray.raycluster.caps import Budget
from rayquota.operator.ray.vocabulary import labels

SCHEDULING_GATE = "rayquota.io/admission"

Pod = Mapping[str, Any]


def gated(pod: Pod) -> bool:
    """Does the pod still carry rayquota's scheduling gate?"""
    return any(g.get("name") == SCHEDULING_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or ())


def without_gate(pod: Pod) -> Pod:
    """The pod as it is once let through (for a cache that does not show it yet)."""
    spec = dict(pod.get("spec") or {})
    spec["schedulingGates"] = [
        g for g in spec.get("schedulingGates") or () if g.get("name") != SCHEDULING_GATE
    ]
    return {**pod, "spec": spec}


def gate_patch(pod: Pod) -> list[dict[str, Any]]:
    """The JSON patch that adds the gate to a pod being created (nothing if it has it)."""
    if gated(pod):
        return []
    if (pod.get("spec") or {}).get("schedulingGates"):
        return [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": SCHEDULING_GATE}}]
    return [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": SCHEDULING_GATE}]}]


def gate_template(template: MutableMapping[str, Any]) -> None:
    """Put the gate into a pod template (the pods a controller creates from it are born held)."""
    spec = template.setdefault("spec", {})
    if not any(g.get("name") == SCHEDULING_GATE for g in spec.get("schedulingGates") or ()):
        spec["schedulingGates"] = [*(spec.get("schedulingGates") or ()), {"name": SCHEDULING_GATE}]


def ungate_template(template: MutableMapping[str, Any]) -> None:
    """Take the gate out of a pod template again (other gates stay)."""
    spec = template.get("spec")
    if not spec or "schedulingGates" not in spec:
        return
    spec["schedulingGates"] = [g for g in spec["schedulingGates"] or () if g.get("name") != SCHEDULING_GATE]
    if not spec["schedulingGates"]:
        del spec["schedulingGates"]
    if not spec:
        del template["spec"]


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def placement_conflicts(pod: Pod, placement: Placement) -> list[str]:
    """nodeSelector keys the pod sets to another value than the flavor's (it could never run on
    the flavor's nodes: it stays gated, and says so)."""
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    return [
        f"nodeSelector {key}={selector[key]} (the flavor's is {value})"
        for key, value in placement.node_selector.items()
        if key in selector and selector[key] != value
    ]


def ungate_patch(pod: Pod) -> list[dict[str, Any]]:
    """The JSON patch that removes the gate, guarded by a test of where it is (a concurrent
    change of the gates fails the patch instead of removing another gate)."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    index = next(i for i, g in enumerate(gates) if g.get("name") == SCHEDULING_GATE)
    return [
        {"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": SCHEDULING_GATE},
        {"op": "remove", "path": f"/spec/schedulingGates/{index}"},
    ]


def placement_patch(pod: Pod, placement: Placement) -> list[dict[str, Any]]:
    """The JSON patch that adds what the pod lacks of the placement (keys it sets are kept)."""
    spec = pod.get("spec") or {}
    ops: list[dict[str, Any]] = []
    selector = spec.get("nodeSelector")
    missing = {k: v for k, v in placement.node_selector.items() if k not in (selector or {})}
    if missing and selector is None:
        ops.append({"op": "add", "path": "/spec/nodeSelector", "value": missing})
    else:
        ops += [
            {"op": "add", "path": f"/spec/nodeSelector/{_pointer(k)}", "value": v} for k, v in missing.items()
        ]
    tolerations = spec.get("tolerations")
    lacking = [dict(t) for t in placement.tolerations if dict(t) not in (tolerations or [])]
    if lacking and tolerations is None:
        ops.append({"op": "add", "path": "/spec/tolerations", "value": lacking})
    else:
        ops += [{"op": "add", "path": "/spec/tolerations/-", "value": t} for t in lacking]
    return ops


def group_of(pod: Pod) -> str | None:
    """None for a head pod, else its worker group's label value."""
    pod_labels = pod["metadata"].get("labels") or {}
    if pod_labels.get(labels.RAY_NODE_TYPE) == labels.HEAD_NODE:
        return None
    return str(pod_labels.get(labels.RAY_GROUP, ""))


@dataclass(frozen=True)
class Release:
    """A gated pod to let through, and where it must run."""

    pod: Pod
    placement: Placement

    def patch(self) -> list[dict[str, Any]]:
        return placement_patch(self.pod, self.placement) + ungate_patch(self.pod)


@dataclass(frozen=True)
class Holding:
    """What the ungater decided for one cluster's gated pods."""

    releases: tuple[Release, ...]
    waiting: tuple[str, ...]  # why the others stay gated, in words


def _domains(caps: AdmittedCaps, group: str | None) -> Domains | None:
    return caps.head_domains if group is None else caps.worker_domains.get(group)


def _pinned(
    placement: Placement, domains: Domains | None, through: list[Mapping[str, Any]]
) -> Placement | None:
    """The placement with a topology domain that has room (None: all full), for a group with
    an assignment; the placement as it is for one without."""
    if not domains:
        return placement
    pins = pins_for_new_pods(domains, through, 1)
    if not pins:
        return None
    return Placement({**placement.node_selector, **pins[0]}, placement.tolerations)


def _caps_by_label(caps: AdmittedCaps) -> dict[str, str]:
    """worker group label value -> group name (pods carry the label form)."""
    return {labels.label_value(group): group for group in caps.workers}


def releases(caps: AdmittedCaps | None, pods: Sequence[Pod]) -> Holding:
    """Which of a cluster's gated pods the admission lets through now (``caps`` None: the
    cluster is under no quota, all of them, as they are). Pods already let through count first
    (terminating ones too: they hold their node until gone); then the gated ones, the head
    first, oldest first."""
    gated_pods = sorted(
        (p for p in pods if gated(p) and not pod_finished(p) and not p["metadata"].get("deletionTimestamp")),
        key=lambda p: (
            group_of(p) is not None,
            str(p["metadata"].get("creationTimestamp", "")),
            p["metadata"]["name"],
        ),
    )
    if caps is None:
        return Holding(tuple(Release(p, ANYWHERE) for p in gated_pods), ())
    through = [p for p in pods if not gated(p) and not pod_finished(p)]
    specs: dict[str | None, list[Mapping[str, Any]]] = {}  # group label -> specs let through
    for pod in through:
        specs.setdefault(group_of(pod), []).append(pod.get("spec") or {})
    budget = Budget.of(caps, through)
    names = _caps_by_label(caps)
    out: list[Release] = []
    waiting: list[str] = []
    for pod in gated_pods:
        label = group_of(pod)
        group = None if label is None else names.get(label, label)
        cap = (1 if caps.head else 0) if group is None else caps.worker_cap(group)
        what = "the head" if group is None else f"a pod of worker group {group!r}"
        placed = specs.setdefault(label, [])
        if len(placed) >= cap:
            waiting.append(f"{what} waits: the admitted quota covers {cap} of its pods")
            continue
        placement = _pinned(caps.placement_of(group), _domains(caps, group), placed)
        if placement is None:
            waiting.append(f"{what} waits: its assigned topology domains are full")
            continue
        conflicts = placement_conflicts(pod, placement)
        if conflicts:
            waiting.append(f"{what} cannot run where it was admitted: it sets {', '.join(conflicts)}")
            continue
        requests = budget.requests_of(pod.get("spec") or {})
        short = budget.short_of(requests)
        if short:
            waiting.append(f"{what} waits: its {', '.join(sorted(short))} would exceed the admitted quota")
            continue
        budget.take(requests)
        placed.append(
            {
                "nodeSelector": {
                    **((pod.get("spec") or {}).get("nodeSelector") or {}),
                    **placement.node_selector,
                }
            }
        )
        out.append(Release(pod, placement))
    return Holding(tuple(out), tuple(dict.fromkeys(waiting)))


def beyond_quota(caps: AdmittedCaps | None, pods: Sequence[Pod]) -> tuple[str, ...]:
    """The live pods of a cluster under quota that run without the gate although the recorded
    admission does not cover them, in words (empty: none). Only a pod created without the gate
    can be such a pod (the ungater lets none through beyond the caps): with the pod webhooks
    off (or down), KubeRay's pods start at once."""
    if caps is None:
        return ()
    names = _caps_by_label(caps)
    counts: dict[str | None, int] = {}
    for pod in pods:
        if not gated(pod) and live(pod):
            label = group_of(pod)
            counts[label] = counts.get(label, 0) + 1
    words = []
    for label, count in sorted(counts.items(), key=lambda item: (item[0] is not None, item[0] or "")):
        group = None if label is None else names.get(label, label)
        cap = (1 if caps.head else 0) if group is None else caps.worker_cap(group)
        if count > cap:
            what = "the head" if group is None else f"{count - cap} pod(s) of worker group {group!r}"
            words.append(f"{what} run(s) beyond the admitted quota (it covers {cap})")
    return tuple(words)


@dataclass(frozen=True)
class PodSetRoom:
    """What a recorded admission gives the pods of one pod set that a controller other than
    rayquota's creates (a Job's, a submitter Job's): how many may run, where, and, with a
    topology assignment, in which domains how many."""

    count: int
    placement: Placement
    domains: Domains | None = None
    why_none: str = ""  # why nothing may run (count 0), in words


def live(pod: Pod) -> bool:
    return not pod_finished(pod) and not pod["metadata"].get("deletionTimestamp")


def pod_set_releases(room: PodSetRoom | None, pods: Sequence[Pod]) -> Holding:
    """Which gated pods of one pod set the admission lets through now (``room`` None: they are
    under no quota, all of them, as they are). Pods already through count first (terminating
    ones too: they hold their node until gone), then the gated ones, oldest first, each pinned
    to an assigned domain with room."""
    gated_pods = sorted(
        (p for p in pods if gated(p) and live(p)),
        key=lambda p: (str(p["metadata"].get("creationTimestamp", "")), p["metadata"]["name"]),
    )
    if room is None:
        return Holding(tuple(Release(p, ANYWHERE) for p in gated_pods), ())
    if room.count <= 0:
        return Holding((), (f"its pods wait: {room.why_none or 'not admitted'}",) if gated_pods else ())
    placed: list[Mapping[str, Any]] = [
        p.get("spec") or {} for p in pods if not gated(p) and not pod_finished(p)
    ]
    out: list[Release] = []
    waiting: list[str] = []
    for pod in gated_pods:
        if len(placed) >= room.count:
            waiting.append(f"a pod waits: the admitted quota covers {room.count} of its pods")
            break
        placement = _pinned(room.placement, room.domains, placed)
        if placement is None:
            waiting.append("a pod waits: its assigned topology domains are full")
            break
        conflicts = placement_conflicts(pod, placement)
        if conflicts:
            waiting.append(f"a pod cannot run where it was admitted: it sets {', '.join(conflicts)}")
            continue
        selector = {**((pod.get("spec") or {}).get("nodeSelector") or {}), **placement.node_selector}
        placed.append({"nodeSelector": selector})
        out.append(Release(pod, placement))
    return Holding(tuple(out), tuple(dict.fromkeys(waiting)))
