"""Which topology domain each new pod of a group is pinned to.

The queue admits a worker group (or the head) with a topology assignment: domains, each a
nodeSelector (``kubernetes.io/hostname: n7``, or ``block: b1, rack: r3``), with a pod count.
The planner creates every pod with the nodeSelector of a domain that still has room, so the
pods of the group never outnumber the assignment in any domain. No scheduling gate is needed
(Kueue needs one because the job's own controller creates its pods before Kueue knows where
they go; here the planner creates them, and creates none whose domain is not assigned).

Pods are filled in the assignment's order, a replica's hosts one after the other; the engine
lists domains in the order of their full path, so the hosts of one rack are consecutive and a
multi-host replica that is a slice stays in one rack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.operator.core.pods import pod_finished
from rayquota.operator.ray.vocabulary import labels

Selector = Mapping[str, str]


def domain_of(pod_spec: Mapping[str, Any], keys: Sequence[str]) -> tuple[str, ...] | None:
    """The domain a pod (or pod template) is pinned to: its nodeSelector's values for ``keys``."""
    selector = pod_spec.get("nodeSelector") or {}
    values = tuple(selector.get(k) for k in keys)
    return None if any(v is None for v in values) else values  # type: ignore[return-value]


def pins_for_new_pods(
    domains: Sequence[tuple[Selector, int]], existing: Sequence[Mapping[str, Any]], wanted: int
) -> list[Selector]:
    """The nodeSelectors of up to ``wanted`` new pods, given the group's live pods' specs.

    Fewer come back when the assignment has no room left (the caps bound the count anyway).
    """
    if not domains or wanted <= 0:
        return []
    keys = tuple(domains[0][0])
    used: dict[tuple[str, ...], int] = {}
    for pod_spec in existing:
        where = domain_of(pod_spec, keys)
        if where is not None:
            used[where] = used.get(where, 0) + 1
    out: list[Selector] = []
    for selector, count in domains:
        where = tuple(selector[k] for k in keys)
        room = count - used.get(where, 0)
        while room > 0 and len(out) < wanted:
            out.append(dict(selector))
            room -= 1
            used[where] = used.get(where, 0) + 1
        if len(out) == wanted:
            break
    return out


def pinned(pod_spec: Mapping[str, Any], selector: Selector) -> dict[str, Any]:
    """The pod spec with the domain's nodeSelector added (its own keys keep theirs otherwise)."""
    spec = dict(pod_spec)
    spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **selector}
    return spec


Domains = tuple[tuple[Selector, int], ...]
"""A group's assigned domains: (nodeSelector, pods) each, in the assignment's order."""


def _group(pod: Mapping[str, Any]) -> str | None:
    pod_labels = pod["metadata"].get("labels") or {}
    if pod_labels.get(labels.RAY_NODE_TYPE) == labels.HEAD_NODE:
        return None
    return str(pod_labels.get(labels.RAY_GROUP, ""))


def pin_created(
    creates: Sequence[dict[str, Any]],
    head: Domains | None,
    workers: Mapping[str, Domains],
    live: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[str]]:
    """The planner's new pods, each pinned to a domain of its group's assignment (``head`` for
    the head, ``workers`` by group label; a group without one is left as it is), and why some
    are not created: their group's domains are full (with the live pods, finished ones aside)."""
    by_group: dict[str | None, list[dict[str, Any]]] = {}
    for pod in creates:
        by_group.setdefault(_group(pod), []).append(pod)
    out: list[dict[str, Any]] = []
    waiting: list[str] = []
    for group, pods in by_group.items():
        domains = head if group is None else workers.get(group)
        if domains is None:
            out.extend(pods)
            continue
        mine = [p.get("spec") or {} for p in live if _group(p) == group and not pod_finished(p)]
        pins = pins_for_new_pods(domains, mine, len(pods))
        for pod, selector in zip(pods, pins, strict=False):
            out.append({**pod, "spec": pinned(pod.get("spec") or {}, selector)})
        if len(pins) < len(pods):
            who = "the head" if group is None else f"worker group {group!r}"
            waiting.append(
                f"{who}: its assigned topology domains are full ({len(pods) - len(pins)} pods wait)"
            )
    return out, waiting
