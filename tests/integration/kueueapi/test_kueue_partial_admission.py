"""Partial admission in Kueue-API mode, with Kueue's own manifests: the single-ClusterQueue setup
(site/static/examples/admin/single-clusterqueue-setup.yaml, 9 CPUs) and the partial-admission
Job (site/static/examples/jobs/sample-job-partial-admission.yaml: parallelism 20, completions
20, ``kueue.x-k8s.io/job-min-parallelism: "5"``), renamed per test. Kueue's docs
(tasks/run/jobs.md): "When queued in a ClusterQueue with only 9 CPUs available, it will be
admitted with parallelism=9. Note that the number of completions doesn't change."

Sampled throughout (tests/gate_sampler.py, watching Kueue's Workloads and ClusterQueue): no pod
before the admission, the CPUs of live pods never above the admitted 9, the Job never
unsuspended without an admission."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.gate_sampler import GateSampler
from tests.integration.kueueapi.conftest import KueueQuota
from tests.integration.queue.conftest import job_pods
from tests.integration.ray.kubehelpers import Kube, condition, wait_for

WORKLOADS = "workloads.kueue.x-k8s.io"

KUEUE_CLUSTER_QUEUE = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: "cluster-queue"
spec:
  namespaceSelector: {} # match all.
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "cpu"
        nominalQuota: 9
      - name: "memory"
        nominalQuota: 36Gi
"""

KUEUE_PARTIAL_ADMISSION_JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: sample-job-partial-admission
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue
  annotations:
    kueue.x-k8s.io/job-min-parallelism: "5"
spec:
  parallelism: 20
  completions: 20
  template:
    spec:
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: ["entrypoint-tester", "hello", "world"]
        resources:
          requests:
            cpu: 1
            memory: "200Mi"
      restartPolicy: Never
"""


@pytest.fixture
def kueue_sampler(control_plane: Any, namespace: str) -> Iterator[Any]:
    """``start(cluster_queue)``: a gate sampler on Kueue's Workloads and ClusterQueue; after the
    test the invariants must have held at every state it saw."""
    started: list[GateSampler] = []

    def start(cluster_queue: str) -> GateSampler:
        sampler = GateSampler(
            str(control_plane.kubeconfig),
            namespace,
            cluster_queue,
            None,
            queue_api=("kueue.x-k8s.io", "v1beta2"),
        ).start()
        started.append(sampler)
        return sampler

    try:
        yield start
        for sampler in started:
            sampler.assert_holds()
    finally:
        for sampler in started:
            sampler.close()


def _workload_of_job(kube: Kube, job: str) -> dict[str, Any] | None:
    for wl in kube.list(WORKLOADS, selector="rayquota.io/owner-kind=job"):
        if wl["metadata"]["labels"].get("rayquota.io/owner-name") == job:
            return dict(wl)
    return None


def test_kueues_partial_admission_job_runs_with_the_parallelism_that_fits(
    kueue_operator: None, kube: Kube, kueue_quota: KueueQuota, namespace: str, kueue_sampler: Any
) -> None:
    flavor = kueue_quota.kueue_flavor("default-flavor")
    spec = yaml.safe_load(KUEUE_CLUSTER_QUEUE)["spec"]
    spec["resourceGroups"][0]["flavors"][0]["name"] = flavor
    cq = kueue_quota.apply("ClusterQueue", "cluster-queue", {"spec": spec})
    kueue_quota.local_queue("user-queue", cq)
    sampler = kueue_sampler(cq)
    job = yaml.safe_load(KUEUE_PARTIAL_ADMISSION_JOB)
    job["metadata"]["namespace"] = namespace
    # This package's operator runs without the webhooks that create a queued Job suspended (as
    # Kueue's do): written suspended, as Kueue's docs say to without them.
    job["spec"]["suspend"] = True
    name = job["metadata"]["name"]
    kube.apply(job)

    workload = wait_for(
        "the Job's Workload admitted",
        lambda: (
            (wl := _workload_of_job(kube, name)) is not None
            and (condition(wl, "Admitted") or {}).get("status") == "True"
            and wl
        ),
    )
    [pod_set] = workload["spec"]["podSets"]
    assert (pod_set["count"], pod_set["minCount"]) == (20, 5)  # the Workload asks for all 20
    [assignment] = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["count"] == 9 and assignment["resourceUsage"]["cpu"] == "9"

    # Kueue's words: admitted with parallelism=9, completions unchanged.
    running = wait_for(
        "the Job unsuspended with parallelism 9",
        lambda: (
            (j := kube.get("job", name)) is not None
            and j["spec"]["suspend"] is False
            and j["spec"]["parallelism"] == 9
            and j
        ),
    )
    assert running["spec"]["completions"] == 20
    # kwok completes each pod a second after it starts: all 20 completions, 9 at a time.
    done = wait_for(
        "the Job complete with 20 pods succeeded",
        lambda: (
            (j := kube.get("job", name)) is not None and (j.get("status") or {}).get("succeeded") == 20 and j
        ),
        timeout_s=60,
    )
    assert done["spec"]["parallelism"] == 9
    wait_for(
        "its pods gone or finished",
        lambda: all(
            (p.get("status") or {}).get("phase") in ("Succeeded", "Failed") for p in job_pods(kube, name)
        ),
    )
    sampler.sync()
    assert sampler.ever("Pod", lambda p: p["metadata"]["name"].startswith(name))
    # One write lowered the parallelism and lifted the gate: no write fight on the Job.
    assert all(growth <= 3 for growth in sampler.generation_growth(("Job",)).values())
