"""The topology part of a RayCluster's admitted caps: per group (the head, each worker group),
the domains its pods go to and how many in each, read off the recorded admission.

The planner pins every new pod to one of these domains (``ray/builders/topology_pins.py``). A pod set
that is placed belongs to one cluster (a RayService's clusters keep placed pod sets apart), so
its whole assignment is that cluster's group's.
"""

from __future__ import annotations

from collections.abc import Mapping

from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.demand.podsets import Demand, Role
from rayquota.operator.ray.builders.topology_pins import Domains
from rayquota.queueing import TopologyAssignment


def domains(assignment: TopologyAssignment) -> Domains:
    return tuple((selector, count) for selector, count in assignment.node_selectors())


def cluster_domains(
    demand: Demand, part: str, admission: AdmittedSlice
) -> tuple[Domains | None, dict[str, Domains]]:
    """(the head's domains, each worker group's) for the cluster ``part``; None / absent where
    the admission carries no topology assignment."""
    assigned: Mapping[str, TopologyAssignment] = {
        ps.name: ps.topology for ps in admission.pod_sets if ps.topology is not None
    }
    if not assigned:
        return None, {}
    head: Domains | None = None
    workers: dict[str, Domains] = {}
    for (role, group), pod_set in demand.pod_set_of.get(part, {}).items():
        topology = assigned.get(pod_set)
        if topology is None:
            continue
        if role is Role.HEAD:
            head = domains(topology)
        elif role is Role.WORKER:
            workers[group] = domains(topology)
    return head, workers
