"""How much room a worker has for a workload: the MostFreeQuota dispatcher's measure. Pure.

The room is read off the worker's ClusterQueue behind the workload's LocalQueue (same namespace
and name as in the manager): per resource the workload asks for, the quota of every flavor that
covers it (``nominalQuota``) less what is reserved there (``status.flavorsReservation``, else
``flavorsUsage``). The room is how many more workloads like this one would fit, by the scarcest
resource; a worker without that LocalQueue or ClusterQueue has none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rayquota.queueing import QuantityError, parse_quantity

Obj = Mapping[str, Any]


def requests_of(workload_spec: Obj) -> dict[str, int]:
    """A Workload's total requests per resource (milli-units), in either group's shape: pod sets
    with ``requests`` per pod (ours) or a pod template (Kueue's)."""
    totals: dict[str, int] = {}
    for pod_set in workload_spec.get("podSets") or ():
        count = int(pod_set.get("count") or 0)
        per_pod = {str(name): _amount(value) for name, value in (pod_set.get("requests") or {}).items()}
        if not per_pod:
            for container in ((pod_set.get("template") or {}).get("spec") or {}).get("containers") or ():
                for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
                    per_pod[str(name)] = per_pod.get(str(name), 0) + _amount(value)
        for name, amount in per_pod.items():
            totals[name] = totals.get(name, 0) + count * amount
    return {name: amount for name, amount in totals.items() if amount > 0}


def free_per_resource(cluster_queue: Obj) -> dict[str, int]:
    """Unreserved quota per resource, summed over the ClusterQueue's flavors."""
    nominal: dict[str, int] = {}
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            for resource in flavor.get("resources") or ():
                name = str(resource.get("name"))
                nominal[name] = nominal.get(name, 0) + _amount(resource.get("nominalQuota"))
    status = cluster_queue.get("status") or {}
    reserved: dict[str, int] = {}
    for flavor in status.get("flavorsReservation") or status.get("flavorsUsage") or ():
        for resource in flavor.get("resources") or ():
            name = str(resource.get("name"))
            reserved[name] = reserved.get(name, 0) + _amount(resource.get("total"))
    return {name: quota - reserved.get(name, 0) for name, quota in nominal.items()}


def room(requests: Mapping[str, int], free: Mapping[str, int] | None) -> float:
    """How many more workloads asking for ``requests`` fit in ``free`` (0 without a queue)."""
    if free is None:
        return 0.0
    fits = [free.get(name, 0) / amount for name, amount in requests.items() if amount > 0]
    return max(0.0, min(fits)) if fits else 0.0


def cluster_queue_of(
    local_queues: Iterable[Obj], cluster_queues: Mapping[str, Obj], namespace: str, queue: str
) -> Obj | None:
    for local_queue in local_queues:
        meta = local_queue["metadata"]
        if meta.get("namespace") == namespace and meta.get("name") == queue:
            return cluster_queues.get(str((local_queue.get("spec") or {}).get("clusterQueue")))
    return None


def _amount(value: Any) -> int:
    if value is None:
        return 0
    try:
        return parse_quantity(value)
    except (QuantityError, ValueError, TypeError):
        return 0
