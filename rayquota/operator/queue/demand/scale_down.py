"""When a smaller admission may be given to the engine.

A queued object's demand is read before the workload reconciler's awaits; meanwhile one of its
clusters may create pods under the admission still recorded (the gate let them: that admission
was the larger one). A smaller admission is submitted only when no pod it would not cover can
exist: none on its way to the cache, and no pod set with more live pods than it asks for.

Pure: counts in, a reason (or None) out.
"""

from __future__ import annotations

from collections.abc import Mapping


def shrinking_pod_sets(admitted: Mapping[str, int], asked: Mapping[str, int]) -> set[str]:
    """The pod sets whose asked count is below their admitted one."""
    return {name for name, count in admitted.items() if asked.get(name, 0) < count}


def why_not_shrink(
    admitted: Mapping[str, int],
    asked: Mapping[str, int],
    live: Mapping[str, int],
    pods_in_flight: bool,
) -> str | None:
    """Why the smaller admission ``asked`` may not replace ``admitted`` yet, or None.

    ``live``: the object's pods in the cache per pod set; ``pods_in_flight``: pods of it were
    created or deleted a moment ago and the cache does not show that yet."""
    shrinking = shrinking_pod_sets(admitted, asked)
    if not shrinking:
        return None
    if pods_in_flight:
        return "pods created or deleted a moment ago are not in the cache yet"
    over = sorted(name for name in shrinking if live.get(name, 0) > asked.get(name, 0))
    if over:
        return f"pod sets {', '.join(over)} have more live pods than the smaller admission"
    return None
