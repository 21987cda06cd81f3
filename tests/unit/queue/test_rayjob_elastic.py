"""Elastic RayJobs (issue #33 point 2): a RayJob whose own cluster autoscales is charged by the
worker sizes of its live cluster (as the autoscaler writes them), not by its spec; in Kueue-API
mode only with Kueue's ``kueue.x-k8s.io/elastic-job: "true"``."""

from __future__ import annotations

import copy
from typing import Any

from rayquota.operator.queue.adapters import registry
from rayquota.operator.queue.adapters.rayjob import ELASTIC_JOB_ANNOTATION, RayJobAdapter, is_elastic
from rayquota.operator.queue.demand.podsets import Demand
from tests.unit.queue import bodies


def autoscaling_job(**annotations: str) -> dict[str, Any]:
    job = bodies.rayjob(
        "train", spec=bodies.cluster_spec(bodies.gpu_worker_group(replicas=1), autoscaling=True)
    )
    job["metadata"]["generation"] = 1
    job["metadata"]["annotations"] = dict(annotations)
    job["status"] = {"rayClusterName": "train-abcde"}
    return job


def live_cluster(job: dict[str, Any], replicas: int, generation: int) -> dict[str, Any]:
    cluster = bodies.raycluster("train-abcde")
    cluster["metadata"]["generation"] = generation
    cluster["spec"] = copy.deepcopy(job["spec"]["rayClusterSpec"])
    cluster["spec"]["workerGroupSpecs"][0]["replicas"] = replicas  # as the autoscaler writes it
    return cluster


def gpu_pods(demand: Demand) -> int:
    return sum(ps.count for ps in demand.pod_sets if ps.role.value == "worker")


def test_an_autoscaling_rayjob_is_charged_by_its_live_cluster_in_rayquota_io() -> None:
    job = autoscaling_job()
    adapter = RayJobAdapter()
    assert gpu_pods(adapter.pod_sets(job, [])) == 1  # before its cluster exists: the spec
    assert gpu_pods(adapter.pod_sets(job, [live_cluster(job, 3, generation=2)])) == 3
    # The autoscaler scales down: the demand follows (the memo keyed by the cluster's generation).
    assert gpu_pods(adapter.pod_sets(job, [live_cluster(job, 0, generation=3)])) == 0


def test_a_rayjob_whose_cluster_does_not_autoscale_is_charged_by_its_spec() -> None:
    job = autoscaling_job()
    del job["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"]
    assert not is_elastic(job, annotation_required=False)
    assert gpu_pods(RayJobAdapter().pod_sets(job, [live_cluster(job, 3, generation=2)])) == 1


def test_kueue_api_mode_needs_kueues_elastic_job_annotation() -> None:
    plain, marked = autoscaling_job(), autoscaling_job(**{ELASTIC_JOB_ANNOTATION: "true"})
    adapter = registry(beside_kuberay=False, kueue_api=True)["RayJob"]
    assert gpu_pods(adapter.pod_sets(plain, [live_cluster(plain, 3, generation=2)])) == 1
    assert gpu_pods(adapter.pod_sets(marked, [live_cluster(marked, 3, generation=2)])) == 3
    assert registry(beside_kuberay=False)["RayJob"] is not adapter


def test_the_annotation_set_to_false_turns_elasticity_off_in_rayquota_io() -> None:
    job = autoscaling_job(**{ELASTIC_JOB_ANNOTATION: "false"})
    assert not is_elastic(job, annotation_required=False)
    assert gpu_pods(RayJobAdapter().pod_sets(job, [live_cluster(job, 3, generation=2)])) == 1


def test_only_the_live_worker_sizes_are_read() -> None:
    """The live cluster's templates (placements injected, a sidecar added) are not the demand's:
    only replicas come from it."""
    job = autoscaling_job()
    live = live_cluster(job, 2, generation=2)
    live["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "nvidia.com/gpu"
    ] = "8"
    demand = RayJobAdapter().pod_sets(job, [live])
    worker = next(ps for ps in demand.pod_sets if ps.role.value == "worker")
    assert worker.count == 2
    assert worker.requests["nvidia.com/gpu"] == 1000  # per pod, in thousandths: the spec's 1
