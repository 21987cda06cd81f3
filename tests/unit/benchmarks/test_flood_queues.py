"""The RayJob flood's queue layout (benchmarks/flood_queues.py)."""

from __future__ import annotations

from collections import defaultdict

from benchmarks import flood_queues


def test_quotas_are_whole_jobs_and_use_every_gpu() -> None:
    quotas = flood_queues.gpu_quotas(512, 10)
    assert quotas == [52] * 6 + [50] * 4
    assert all(q % flood_queues.GPUS_PER_JOB == 0 for q in quotas)
    assert sum(flood_queues.gpu_quotas(510, 4)) == 510


def test_admissible_jobs_are_capped_by_each_queues_quota() -> None:
    assert flood_queues.jobs_admissible(512, 10, 1000) == 256
    assert flood_queues.jobs_admissible(512, 10, 100) == 100
    # 300 jobs: 30 per queue, each admits 26 or 25.
    assert flood_queues.jobs_admissible(512, 10, 300) == 256


def test_two_cohorts_share_the_gpus_evenly() -> None:
    items = flood_queues.queue_manifests("flood", total_gpus=512, queues=10, cohorts=2)
    cluster_queues = [i for i in items if i["kind"] == "ClusterQueue"]
    local_queues = [i for i in items if i["kind"] == "LocalQueue"]
    assert len(cluster_queues) == len(local_queues) == 10
    per_cohort: dict[str, int] = defaultdict(int)
    for cq in cluster_queues:
        [resources] = [f["resources"] for f in cq["spec"]["resourceGroups"][0]["flavors"]]
        gpus = next(r["nominalQuota"] for r in resources if r["name"] == flood_queues.GPU)
        per_cohort[cq["spec"]["cohort"]] += int(gpus)
    assert per_cohort == {"cohort-a": 256, "cohort-b": 256}
    assert {lq["spec"]["clusterQueue"] for lq in local_queues} == {
        cq["metadata"]["name"] for cq in cluster_queues
    }
    assert flood_queues.queue_of_job(13, 10) == "lq-3"
