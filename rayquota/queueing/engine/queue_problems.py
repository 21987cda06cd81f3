"""Why a ClusterQueue cannot admit anything: the objects its spec names that are missing.

Kueue keeps such a queue pending (``Active=False``) until they exist: a ResourceFlavor it lists
(``FlavorNotFound``), an AdmissionCheck it requires (``AdmissionCheckNotFound``, or
``AdmissionCheckInactive`` when its controller is not running), the Topology a listed flavor
names (``TopologyNotFound``). The condition's reason is the first problem in that order; its
message names every one. A queue with any of them admits nothing, not even through its other
flavors, so what it would admit never depends on which objects happen to exist yet.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ..admission_checks import AdmissionCheck, CheckProblem, check_problems
from ..model import ClusterQueue, ResourceFlavor

FLAVOR_NOT_FOUND = "FlavorNotFound"
TOPOLOGY_NOT_FOUND = "TopologyNotFound"
CANNOT_ADMIT = "Can't admit new workloads"


def listed_flavors(spec: ClusterQueue) -> list[str]:
    """The flavors the queue's resource groups list, in order, each once."""
    names: list[str] = []
    for group in spec.resource_groups:
        for flavor in group.flavors:
            if flavor.flavor not in names:
                names.append(flavor.flavor)
    return names


def queue_problem(
    spec: ClusterQueue,
    flavors: Mapping[str, ResourceFlavor],
    topologies: Collection[str],
    checks: Mapping[str, AdmissionCheck],
) -> CheckProblem | None:
    """``None`` when everything the queue names exists (and its checks are active)."""
    problems: list[tuple[str, str]] = []
    listed = listed_flavors(spec)
    missing = [name for name in listed if name not in flavors]
    if missing:
        noun = "ResourceFlavors" if len(missing) > 1 else "ResourceFlavor"
        problems.append((FLAVOR_NOT_FOUND, f"{noun} {', '.join(missing)} not found"))
    problems += check_problems(spec.admission_checks, checks)
    for name in listed:
        flavor = flavors.get(name)
        if flavor is not None and flavor.topology_name and flavor.topology_name not in topologies:
            problems.append(
                (TOPOLOGY_NOT_FOUND, f"Topology {flavor.topology_name} of ResourceFlavor {name} not found")
            )
    if not problems:
        return None
    return CheckProblem(problems[0][0], f"{CANNOT_ADMIT}: " + "; ".join(words for _, words in problems))
