"""The queues of the RayJob flood (benchmarks/rayjob_flood.py): one ResourceFlavor, LocalQueues
each backed by its own ClusterQueue, the ClusterQueues split over cohorts.

Quota choice: the ClusterQueues' nominal GPU quotas add up to exactly the GPUs of the fake
nodes, each an even number (a job needs 2 GPUs), so every admitted job can be scheduled and no
GPU is left that a job could have used. With 512 GPUs that is 256 jobs admitted at once; the
rest wait in their queues. CPU and memory are covered with quotas no flood reaches, so the GPU
is the only resource that decides.
"""

from __future__ import annotations

from typing import Any

API_VERSION = "rayquota.io/v1alpha1"
FLAVOR = "flood-gpu"
QUEUE_LABEL = "rayquota.io/queue-name"
GPU = "nvidia.com/gpu"
GPUS_PER_JOB = 2
# Far more than any flood asks for: only GPUs limit admission.
AMPLE_CPU = "10000"
AMPLE_MEMORY = "100Ti"


def local_queue_name(index: int) -> str:
    return f"lq-{index}"


def cluster_queue_name(index: int) -> str:
    return f"cq-{index}"


def cohort_name(index: int, cohorts: int) -> str:
    return f"cohort-{'abcdefghij'[index % cohorts]}"


def queue_of_job(job_index: int, queues: int) -> str:
    """Jobs are dealt round-robin over the LocalQueues."""
    return local_queue_name(job_index % queues)


def gpu_quotas(total_gpus: int, queues: int, gpus_per_job: int = GPUS_PER_JOB) -> list[int]:
    """Nominal GPU quota per ClusterQueue: whole jobs only, as even as possible, summing to
    every GPU that whole jobs can use (512 GPUs over 10 queues: 6 x 52 and 4 x 50)."""
    jobs = total_gpus // gpus_per_job
    base, extra = divmod(jobs, queues)
    return [(base + (1 if i < extra else 0)) * gpus_per_job for i in range(queues)]


def jobs_admissible(total_gpus: int, queues: int, jobs: int) -> int:
    """How many of `jobs` (dealt round-robin) the quotas admit at once."""
    quotas = gpu_quotas(total_gpus, queues)
    per_queue = [jobs // queues + (1 if i < jobs % queues else 0) for i in range(queues)]
    return sum(min(want, quota // GPUS_PER_JOB) for want, quota in zip(per_queue, quotas, strict=True))


def queue_manifests(namespace: str, *, total_gpus: int, queues: int, cohorts: int) -> list[dict[str, Any]]:
    """The flavor (no node labels: heads go to CPU nodes, GPU workers to GPU nodes by their own
    tolerations), the Cohorts, one ClusterQueue and one LocalQueue per queue."""
    flavor: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": FLAVOR},
        "spec": {},
    }
    cohort_objects = [
        {
            "apiVersion": API_VERSION,
            "kind": "Cohort",
            "metadata": {"name": cohort_name(i, cohorts)},
            "spec": {},
        }
        for i in range(cohorts)
    ]
    items: list[dict[str, Any]] = [flavor, *cohort_objects]
    for i, gpus in enumerate(gpu_quotas(total_gpus, queues)):
        resources = [
            {"name": "cpu", "nominalQuota": AMPLE_CPU},
            {"name": "memory", "nominalQuota": AMPLE_MEMORY},
            {"name": GPU, "nominalQuota": str(gpus)},
        ]
        items.append(
            {
                "apiVersion": API_VERSION,
                "kind": "ClusterQueue",
                "metadata": {"name": cluster_queue_name(i)},
                "spec": {
                    "cohort": cohort_name(i, cohorts),
                    "queueingStrategy": "BestEffortFIFO",
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory", GPU],
                            "flavors": [{"name": FLAVOR, "resources": resources}],
                        }
                    ],
                },
            }
        )
        items.append(
            {
                "apiVersion": API_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": local_queue_name(i), "namespace": namespace},
                "spec": {"clusterQueue": cluster_queue_name(i)},
            }
        )
    return items
