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
