"""What the scheduler reserves for a pod: its requests, computed in one place for the queue's pod
sets, the RayCluster planner's quota budget and the status columns."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rayquota.operator.core.pods import pod_finished
from rayquota.queueing import parse_quantity


def container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    """A container's effective requests: its request, else its limit (as the API server defaults)."""
    resources = container.get("resources") or {}
    merged: dict[str, Any] = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: parse_quantity(str(value)) for name, value in merged.items()}


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, int]:
    """What the scheduler reserves for one pod, in milli-units: containers summed, init
    containers at their peak, plus the pod overhead. Zero amounts are dropped."""
    total: dict[str, int] = {}
    for container in pod_spec.get("containers") or []:
        for name, amount in container_requests(container).items():
            total[name] = total.get(name, 0) + amount
    for container in pod_spec.get("initContainers") or []:
        for name, amount in container_requests(container).items():
            total[name] = max(total.get(name, 0), amount)
    for name, value in (pod_spec.get("overhead") or {}).items():
        total[name] = total.get(name, 0) + parse_quantity(str(value))
    return {name: amount for name, amount in total.items() if amount}


def holds_resources(pod: Mapping[str, Any]) -> bool:
    """A pod holds its node's resources until it has finished or is gone: a terminating pod
    still does. One held at a scheduling gate and never bound holds nothing yet."""
    spec = pod.get("spec") or {}
    return not pod_finished(pod) and (bool(spec.get("nodeName")) or not spec.get("schedulingGates"))


RequestsOf = Callable[[Mapping[str, Any]], dict[str, int]]


def held_by(pods: Iterable[Mapping[str, Any]], requests_of: RequestsOf | None = None) -> dict[str, int]:
    """The requests of the pods that hold resources, summed per resource (``requests_of``: a
    pod spec's requests as the caller counts them; by default :func:`pod_requests`)."""
    requests_of = requests_of or pod_requests
    total: dict[str, int] = {}
    for pod in pods:
        if holds_resources(pod):
            for name, amount in requests_of(pod.get("spec") or {}).items():
                total[name] = total.get(name, 0) + amount
    return total
