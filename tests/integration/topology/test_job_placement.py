"""A batch/v1 Job's pods, and a K8sJobMode RayJob's submitter pod, held to their topology
assignment (issue #36, point 3), in rayquota's own mode and without webhooks: the Job controller
creates those pods, not rayquota's planner, so the admission puts rayquota's scheduling gate
into the pod template (the Job's, with the flavor's placement, while it is still suspended; the
RayJob's ``submitterPodTemplate``) and the Job pod ungater lets each pod through pinned to an
assigned host, never more pods on a host than assigned (as Kueue's topology ungater does).

Judged on every version the API server stored (tests/gate_sampler.py): no pod before the
admission, every pod on its flavor, and here also every pod born held and never bound off its
assignment.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.gate_invariants import FlavorPlacement
from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import admitted_workload, gpu_job, running_pods
from tests.integration.ray.kubehelpers import Kube
from tests.integration.topology.conftest import POOL, RACK, Racks
from tests.integration.topology.test_racks import REQUIRED, assigned_nodes, rack_job, racks_of

GATE = "rayquota.io/admission"
MANUAL_COMPLETION = "rayquota.io/kwok-manual-completion"  # kwok leaves the pod Running
JOB_NAME = "batch.kubernetes.io/job-name"


def of_job(job: str) -> Any:
    def match(pod: Mapping[str, Any]) -> bool:
        return (pod["metadata"].get("labels") or {}).get(JOB_NAME) == job

    return match


def bound_off(pod: Mapping[str, Any], assigned: Mapping[str, int]) -> bool:
    node = pod["spec"].get("nodeName")
    return bool(node) and node not in assigned


def born_held(sampler: GateSampler, name: str) -> bool:
    first = sampler.first("Pod", lambda p: p["metadata"]["name"] == name)
    assert first is not None, name
    return GATE in {g.get("name") for g in first["spec"].get("schedulingGates") or ()}


def test_a_jobs_pods_are_born_held_and_let_through_pinned_to_their_assigned_hosts(
    topology_operator: Path, kube: Kube, racks: Racks, control_plane: Any, namespace: str
) -> None:
    racks.add("r0", 2)
    racks.add("r1", 2)
    cluster_queue = racks.queue(gpus=16)
    toleration = {"key": POOL, "operator": "Equal", "value": namespace, "effect": "NoSchedule"}
    placement = FlavorPlacement({POOL: namespace}, (toleration,))
    with GateSampler(str(control_plane.kubeconfig), namespace, cluster_queue, placement) as sampler:
        job = gpu_job("train", "team", parallelism=4, completions=4, gpus=1)
        job["spec"]["template"]["metadata"]["annotations"] = {REQUIRED: RACK}
        kube.apply(job)
        admitted = admitted_workload(kube, "Job", "train")
        assigned = assigned_nodes(admitted)
        assert sum(assigned.values()) == 4 and len(racks_of(racks, assigned)) == 1
        pods = running_pods(kube, "train", 4)
        # Per host exactly as assigned (the scheduler alone spreads them over the 4 nodes).
        assert Counter(p["spec"]["nodeName"] for p in pods) == Counter(assigned)
        assert all(born_held(sampler, p["metadata"]["name"]) for p in pods)
        sampler.sync()
        assert not sampler.ever("Pod", lambda p: of_job("train")(p) and bound_off(p, assigned))
        sampler.assert_holds()


def test_a_rayjobs_submitter_pod_is_born_held_and_pinned_to_its_assigned_host(
    topology_operator: Path, kube: Kube, racks: Racks, control_plane: Any, namespace: str
) -> None:
    racks.add("r0", 2)
    racks.add("r1", 2)
    cluster_queue = racks.queue(gpus=16)
    # The submitter is created once the cluster is ready and has a dashboard address (none
    # answers there: the submitter's placement is what is judged, not the Ray job).
    routes = json.loads(topology_operator.read_text() or "{}")
    topology_operator.write_text(json.dumps({**routes, f"{namespace}/*": "http://127.0.0.1:9"}))
    toleration = {"key": POOL, "operator": "Equal", "value": namespace, "effect": "NoSchedule"}
    placement = FlavorPlacement({POOL: namespace}, (toleration,))
    with GateSampler(str(control_plane.kubeconfig), namespace, cluster_queue, placement) as sampler:
        rayjob = rack_job("rj", hosts=1, gpus=1)
        rayjob["spec"]["submissionMode"] = "K8sJobMode"
        rayjob["spec"]["submitterPodTemplate"] = {
            "metadata": {"labels": {MANUAL_COMPLETION: "true"}, "annotations": {REQUIRED: RACK}},
            "spec": {"containers": [{"name": "submitter", "image": "rayproject/ray:2.46.0"}]},
        }
        kube.apply(rayjob)
        admitted = admitted_workload(kube, "RayJob", "rj")
        hosts = assigned_nodes(admitted, "submitter")
        assert sum(hosts.values()) == 1
        [pod] = running_pods(kube, "rj", 1)
        assert pod["spec"]["nodeName"] in hosts
        assert born_held(sampler, pod["metadata"]["name"])
        sampler.sync()
        assert not sampler.ever("Pod", lambda p: of_job("rj")(p) and bound_off(p, hosts))
        sampler.assert_holds()
