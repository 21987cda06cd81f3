"""The first admission beside KubeRay's real operator, with rayquota's own loopback webhooks on
(as `rayquota run --no-reconcilers` starts): objects created suspended or not run only once
admitted, KubeRay's pods held at their scheduling gate where the cluster's `suspend` is KubeRay's
to write. The gate sampler judges the gate's invariants and every object's generation
throughout: the two operators never write one field back and forth."""

from __future__ import annotations

from typing import Any

from tests.e2e.beside_kuberay.harness import (
    IMAGE,
    Cell,
    Stage,
    cluster_spec,
    gpu_service,
    pods_of,
    queued,
    run_cells,
    running_on_pool,
    service_clusters,
)
from tests.e2e.beside_kuberay.rayjob_modes import JOBS, rayjobs_in_every_mode


def rayservice_waits_then_runs(cell: Cell) -> None:
    """Issue 36's first cluster: RayServices created without suspend under a 5-GPU queue. The
    first (4 GPUs) runs: KubeRay's pods are held at their scheduling gate and let through on the
    flavor. The second (2 GPUs) waits with the engine's reason, its cluster suspended and
    without pods, and runs once the quota is raised to 6. (Upgrades: test_upgrades.py.)"""
    sampler = cell.sampler
    cell.apply(gpu_service(cell.ns, "up", workers=2, gpus_per_worker=2))
    up = cell.wait("KubeRay's first cluster", lambda: next(iter(service_clusters(sampler, "up")), None), 90)
    cell.wait(
        "its 3 pods let through, Running on the flavor",
        lambda: running_on_pool(pods_of(sampler, up), 3),
        150,
    )
    cell.apply(gpu_service(cell.ns, "next", workers=2, gpus_per_worker=1))
    cell.wait(
        "the second RayService's Workload waiting, with a reason",
        lambda: (
            (w := cell.workload_of("RayService", "next"))
            and not (w.get("status") or {}).get("admission")
            and (w.get("status") or {}).get("pendingReason")
        ),
        90,
    )
    nxt = cell.wait(
        "KubeRay's cluster for it", lambda: next(iter(service_clusters(sampler, "next")), None), 90
    )
    assert sampler.current("RayCluster")[nxt]["spec"].get("suspend") is True
    assert not pods_of(sampler, nxt)
    cell.set_gpus(6)
    cell.wait(
        "the second RayService's pods let through, Running on the flavor",
        lambda: running_on_pool(pods_of(sampler, nxt), 3),
        150,
    )
    assert running_on_pool(pods_of(sampler, up), 3)
    sampler.assert_holds()
    sampler.assert_no_write_fight()


def first_admissions(cell: Cell) -> None:
    """Top-level gates beside KubeRay, with the webhooks on: a RayCluster created suspended and
    one created without suspend, a RayJob (K8sJobMode) and a RayService created without it, and
    a RayJob over quota. What KubeRay reaches without a real Ray head: the admitted objects' pods
    Running on the flavor, and the RayJob's submitter Job created; the one over quota gets no
    cluster at all. (The Ray job itself and the Serve application need a head: not judged here;
    rayjob_modes.py runs RayJobs to their end against fake heads.)"""
    sampler = cell.sampler
    job_spec: dict[str, Any] = {
        "entrypoint": "python -c 'print(1)'",
        "submissionMode": "K8sJobMode",
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": cluster_spec(1, 1),
        # Written out (as for Kueue): rayquota puts the flavor's placement into it. (Beside KubeRay
        # it never creates one: KubeRay would take it as the whole submitter pod.)
        "submitterPodTemplate": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "ray-job-submitter",
                        "image": IMAGE,
                        "resources": {"requests": {"cpu": "500m", "memory": "200Mi"}},
                    }
                ],
            }
        },
    }
    manifests = [
        queued("RayCluster", cell.ns, "rc-suspended", {**cluster_spec(1, 1), "suspend": True}),
        queued("RayCluster", cell.ns, "rc-plain", cluster_spec(1, 1)),
        queued("RayJob", cell.ns, "job", job_spec),
        queued("RayService", cell.ns, "svc", {"rayClusterConfig": cluster_spec(1, 1)}),
        queued("RayJob", cell.ns, "too-big", {**job_spec, "rayClusterSpec": cluster_spec(2, 4)}),
    ]
    for manifest in manifests:
        cell.apply(manifest)
    # 4 GPUs, 1 each: the first four fit, whatever order they are admitted in.
    cell.wait(
        "the RayClusters' pods Running on the flavor",
        lambda: all(running_on_pool(pods_of(sampler, n), 2) for n in ("rc-suspended", "rc-plain")),
        180,
    )
    job_cluster = cell.wait(
        "the RayJob's cluster",
        lambda: (sampler.current("RayJob").get("job", {}).get("status") or {}).get("rayClusterName"),
        120,
    )
    cell.wait(
        "its pods Running on the flavor", lambda: running_on_pool(pods_of(sampler, job_cluster), 2), 150
    )
    service_cluster = cell.wait(
        "the RayService's cluster", lambda: next(iter(service_clusters(sampler, "svc")), None), 90
    )
    cell.wait(
        "the RayService's pods let through, Running on the flavor",
        lambda: running_on_pool(pods_of(sampler, service_cluster), 2),
        150,
    )
    cell.wait(
        "the RayJob's submitter Job",
        lambda: any(
            ref.get("name") == "job"
            for j in sampler.current("Job").values()
            for ref in j["metadata"].get("ownerReferences") or ()
        ),
        150,
    )
    # KubeRay v1.6.2 takes a RayJob created suspended through Initializing (naming a cluster it
    # does not create) to Suspended, clearing the name: judged once it is there (under load
    # that can come after the others ran), and no cluster of it ever existed.
    too_big = cell.wait(
        "KubeRay reporting the over-quota RayJob Suspended",
        lambda: (
            (job := sampler.current("RayJob")["too-big"])
            and (job.get("status") or {}).get("jobDeploymentStatus") == "Suspended"
            and job
        ),
        90,
    )
    assert too_big["spec"]["suspend"] is True
    assert not (too_big.get("status") or {}).get("rayClusterName")
    assert not sampler.ever("RayCluster", lambda c: str(c["metadata"]["name"]).startswith("too-big-"))
    sampler.assert_holds()
    sampler.assert_no_write_fight()


def test_first_admissions_beside_kuberay_created_suspended_or_not_and_a_rayservice_waiting_for_quota(
    stage: Stage,
) -> None:
    """The three cells side by side, each in a namespace of its own."""
    run_cells(
        {
            "a RayService under a tight quota": (
                Cell(stage, gpus=5),
                rayservice_waits_then_runs,
                (("rayservice", "up"), ("rayservice", "next")),
            ),
            "RayJobs in every submission mode": (
                Cell(stage, gpus=6),
                rayjobs_in_every_mode,
                tuple(("rayjob", name) for name in JOBS),
            ),
            "first admissions": (
                Cell(stage, gpus=4),
                first_admissions,
                (
                    ("raycluster", "rc-suspended"),
                    ("raycluster", "rc-plain"),
                    ("rayjob", "job"),
                    ("rayservice", "svc"),
                    ("rayjob", "too-big"),
                ),
            ),
        }
    )
