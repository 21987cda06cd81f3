"""Admission-only mode installed with the chart beside KubeRay's real operator (v1.6.2, built
from the Go module proxy).

A control plane of its own plays a cluster that already runs KubeRay: KubeRay's CRDs, KubeRay's
operator reconciling the ray.io objects. The chart goes in with `reconcilers.enabled=false`
(bringing only the rayquota.io CRDs), and rayquota runs with the chart's ServiceAccount token.
A queued RayCluster stays suspended, so KubeRay creates no pod, until its quota is admitted;
then KubeRay runs it. One over quota never gets a pod. The same for a RayJob created suspended:
KubeRay creates its cluster only once it is admitted. This is the package's webhooks-off cell
(`webhooks.enabled=false`): a rayquota without webhooks holds only objects created suspended
(docs/install.md says which paths need the webhooks). (This file runs before the package's
shared stage exists: its own rayquota and KubeRay watch a namespace of their own, with a
ClusterQueue named after it, so the two rayquota operators never share one.)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.localcluster.cluster import LocalCluster
from rayquota.ports import free_port
from tests.e2e.beside_kuberay.harness import (
    POOL,
    Cell,
    Stage,
    admitted_gpus,
    describe,
    gpu_service,
    kuberay_running,
    pods_of,
    service_clusters,
)
from tests.e2e.beside_kuberay.test_upgrades import one_gpu_workers, served_service
from tests.e2e.chart import CHART, helm, service_account_kubeconfig
from tests.e2e.kuberay_heads import FakeHeads, HostsFile, with_hosts_file
from tests.e2e.test_chart_install import LocalOperator, assert_only_declared_requests, declared_grants
from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import GPU_TOLERATION
from tests.polling import wait_for
from tests.quota import (
    REPO,
    Quota,
    admitted_workload,
    cluster_pods,
    get_json,
    pending_workload,
    sample_cluster,
)


@pytest.mark.usefixtures("kuberay_operator")
def test_admission_only_rayquota_gates_kuberays_own_operator(
    kuberay_cluster: LocalCluster, kuberay_namespace: str, tmp_path: Path
) -> None:
    namespace, cluster = kuberay_namespace, kuberay_cluster
    install = helm(
        "install",
        "rq",
        str(CHART),
        "-n",
        namespace,
        "--set",
        "reconcilers.enabled=false",
        "--set",
        "webhooks.enabled=false",
        "--wait",
        "--timeout",
        "120s",
        cluster=cluster,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    crds = (get_json(cluster, "crd") or {}).get("items") or []
    ours = {c["metadata"]["name"] for c in crds if c["spec"]["group"] == "rayquota.io"}
    assert "clusterqueues.rayquota.io" in ours
    # KubeRay's ray.io CRDs are untouched: still KubeRay's (RayCronJob is theirs alone).
    assert "raycronjobs.ray.io" in {c["metadata"]["name"] for c in crds}
    quota = Quota(cluster, namespace)
    quota.create()
    operator = LocalOperator(
        service_account_kubeconfig(cluster, namespace, "rq-rayquota"), namespace, tmp_path, "--no-reconcilers"
    )
    try:
        fits = sample_cluster(namespace)
        too_big = sample_cluster(namespace, "too-big", gpu_workers=5)
        for manifest in (fits, too_big):
            manifest["spec"]["suspend"] = True  # as written for Kueue; our webhook would set it too
            for group in manifest["spec"]["workerGroupSpecs"]:
                # KubeRay 1.6 accepts a group's idle timeout only with autoscaler v2.
                group.pop("idleTimeoutSeconds", None)
        # RayJobs created suspended, as written for Kueue (without webhooks nothing else can hold
        # a RayJob before KubeRay creates its cluster): one fits beside the sample (8 GPUs in
        # all), one never does.
        jobs = [
            _suspended_rayjob(namespace, "job-fits", fits),
            _suspended_rayjob(namespace, "job-too-big", too_big),
        ]
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([fits, too_big, *jobs]))
        name = fits["metadata"]["name"]
        wait_for("the sample admitted", lambda: admitted_workload(cluster, namespace, name), 90)
        # KubeRay's operator sees the gate lifted and creates the head and the workers.
        wait_for(
            "KubeRay's pods for the admitted cluster",
            lambda: len(cluster_pods(cluster, namespace, name)) == 4,
            120,
        )
        wait_for(
            "KubeRay to report the admitted cluster ready",
            lambda: (
                ((get_json(cluster, "raycluster", name, "-n", namespace) or {}).get("status") or {}).get(
                    "state"
                )
                == "ready"
            ),
            90,
        )
        wait_for(
            "the over-quota cluster pending",
            lambda: pending_workload(cluster, namespace, "too-big"),
        )
        assert not cluster_pods(cluster, namespace, "too-big")
        too_big_now = get_json(cluster, "raycluster", "too-big", "-n", namespace) or {}
        assert too_big_now["spec"]["suspend"] is True
        wait_for("the fitting RayJob admitted", lambda: admitted_workload(cluster, namespace, "job-fits"), 90)
        job_cluster = wait_for(
            "KubeRay's cluster for the admitted RayJob",
            lambda: (
                (get_json(cluster, "rayjob", "job-fits", "-n", namespace) or {}).get("status") or {}
            ).get("rayClusterName"),
            90,
        )
        wait_for(
            "KubeRay's pods for the admitted RayJob",
            lambda: len(cluster_pods(cluster, namespace, str(job_cluster))) == 4,
            120,
        )
        wait_for("the over-quota RayJob pending", lambda: pending_workload(cluster, namespace, "job-too-big"))
        waiting_job = get_json(cluster, "rayjob", "job-too-big", "-n", namespace) or {}
        assert waiting_job["spec"]["suspend"] is True
        assert not (waiting_job.get("status") or {}).get("rayClusterName"), "KubeRay made a cluster for it"
        assert "components: queue" in operator.log()
    finally:
        # While KubeRay still runs: it takes its finalizers off the RayJobs.
        cluster.kubectl("delete", "rayjobs", "--all", "-n", namespace, "--wait=false", check=False)
        out = operator.stop()
        quota.delete()
        helm("uninstall", "rq", "-n", namespace, "--wait", cluster=cluster)
    assert operator.proc.returncode == 0, out[-4000:]
    assert_only_declared_requests(operator, declared_grants(reconcilers=False, self_issued_cert=False), out)


def _suspended_rayjob(namespace: str, name: str, cluster: dict[str, Any]) -> dict[str, Any]:
    """A queued RayJob created suspended, on the sample cluster's spec; HTTPMode: no submitter
    pod (KubeRay asks a head that is not there, and the RayJob stays Running)."""
    spec = {k: v for k, v in cluster["spec"].items() if k != "suspend"}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(cluster["metadata"]["labels"])},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "submissionMode": "HTTPMode",
            "shutdownAfterJobFinishes": True,
            "suspend": True,
            "rayClusterSpec": spec,
        },
    }


def test_without_webhooks_a_rayservice_upgrade_beyond_quota_is_flagged_and_one_created_unsuspended_is_stopped(
    kuberay_cluster: LocalCluster, kuberay_namespace: str, tmp_path: Path
) -> None:
    """RayServices beside KubeRay with rayquota's webhooks off (`--no-webhooks`), as
    docs/install.md says: only the first admission of one created with
    `rayClusterConfig.suspend: true` is held. Without the pod webhook no pod gets the scheduling
    gate, so an upgrade's pending cluster runs at once, beyond the quota: rayquota cannot hold
    it, and says so (a `PodsBeyondQuota` Warning on that cluster, naming the pods the admission
    does not cover) until the quota covers it. A RayService created without suspend is not held
    either (KubeRay may start its pods first); rayquota then sets `rayClusterConfig.suspend`,
    KubeRay suspends its cluster and deletes the pods, and it waits with a reason. KubeRay's
    own fake heads (tests/e2e/kuberay_heads.py) let it prepare the upgrade; the two operators
    never write one field back and forth. (Before the package's stage exists: its own rayquota,
    and the ClusterQueue is named after the namespace.)"""
    cluster, namespace = kuberay_cluster, kuberay_namespace
    crds = sorted(str(p) for p in (REPO / "crds").glob("rayquota.io_*.yaml"))
    files = [a for p in crds for a in ("-f", p)]
    cluster.kubectl("apply", "--server-side", "--force-conflicts", *files, timeout=300)
    discovery = ("api-resources", "--api-group=rayquota.io", "-o", "name")
    wait_for(
        "rayquota's CRDs served",
        lambda: len(cluster.kubectl(*discovery, check=False).stdout.split()) >= len(crds),
        120,
    )
    first_address = 0x4E0000 + (os.getpid() % 200) * 256 + 1  # 127.78.x.1 on: apart from the stage
    heads = FakeHeads(HostsFile(tmp_path / "hosts"), namespace, free_port(), first_address)
    heads.start()
    try:
        with kuberay_running(
            cluster, [namespace], tmp_path / "kuberay.log", lambda c: with_hosts_file(c, heads.hosts)
        ):
            operator = LocalOperator(
                cluster.kubeconfig, namespace, tmp_path, "--no-reconcilers", "--no-webhooks"
            )
            try:
                wait_for("rayquota's queue", lambda: "components: queue" in operator.log(), 240)
                _rayservices_without_webhooks(Stage(cluster, heads, operator, tmp_path, [namespace]))
            finally:
                cluster.kubectl(
                    "delete", "rayservices", "--all", "-n", namespace, "--wait=false", check=False
                )
                out = operator.stop()
            assert operator.proc.returncode == 0, out[-4000:]
    finally:
        heads.stop()


def _rayservices_without_webhooks(stage: Stage) -> None:
    cell = Cell(stage, gpus=5)
    sampler, heads = cell.sampler, stage.heads
    try:
        body = served_service(cell.ns, "up", heads.dashboard_port)
        body["spec"]["rayClusterConfig"]["suspend"] = True  # as written for Kueue: held
        # Written for the pool: without the pod webhook nothing adds the flavor's placement to a
        # RayService's pods (the pod gate's ungater does), and the GPU nodes are tainted.
        worker = body["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]
        worker.update(nodeSelector={"rayquota.io/gpu-pool": POOL}, tolerations=[GPU_TOLERATION])
        cell.apply(body)
        first = cell.wait(
            "KubeRay's first cluster, once admitted",
            lambda: next(
                (n for n, c in service_clusters(sampler, "up").items() if not c["spec"].get("suspend")), None
            ),
            120,
        )
        heads.add(first, serving=True, namespace=cell.ns)
        cell.wait("its 3 pods Running", lambda: _running(pods_of(sampler, first), 3), 150)
        cell.wait("the first cluster active", lambda: _active(sampler, "up") == first, 120)
        one_gpu_workers(cell, "up")
        new = cell.wait(
            "KubeRay's cluster for the new shape",
            lambda: next((n for n in service_clusters(sampler, "up") if n != first), None),
            120,
        )
        heads.add(new, serving=True, namespace=cell.ns)
        # No pod webhook: KubeRay's pods for it run at once, 6 GPUs on a 5-GPU quota.
        cell.wait("the new cluster's pods Running, ungated", lambda: _running(pods_of(sampler, new), 3), 150)
        # Said again as KubeRay adds pods (its head first): the words come to name the workers.
        flagged = cell.wait(
            "a PodsBeyondQuota Warning on the new cluster naming its workers",
            lambda: [
                m
                for e in _warnings(cell, "PodsBeyondQuota")
                if e["involvedObject"]["name"] == new
                and "2 pod(s) of worker group 'gpu'" in (m := str(e["message"]))
            ],
            60,
        )
        assert "pod webhooks off" in flagged[0], flagged
        cell.wait("the Workload waiting, naming GPUs", lambda: "nvidia.com/gpu" in _reason(cell, "up"), 60)
        assert admitted_gpus(cell.workload_of("RayService", "up")) == 4
        cell.set_gpus(6)
        cell.wait(
            "the new shape admitted", lambda: admitted_gpus(cell.workload_of("RayService", "up")) == 6, 90
        )
        cell.wait("KubeRay making the new cluster active", lambda: _active(sampler, "up") == new, 120)
        # Created without suspend, 6 GPUs: it never fits beside `up` (also once KubeRay deletes
        # the replaced cluster). Held only after the fact.
        cell.apply(gpu_service(cell.ns, "late", workers=3, gpus_per_worker=2))
        cell.wait(
            "the late RayService suspended, waiting with a reason, its cluster's pods gone",
            lambda: (
                _config_suspended(sampler, "late")
                and _reason(cell, "late")
                and all(c["spec"].get("suspend") for c in service_clusters(sampler, "late").values())
                and not any(pods_of(sampler, n) for n in service_clusters(sampler, "late"))
            ),
            120,
        )
        assert admitted_gpus(cell.workload_of("RayService", "late")) is None
        sampler.assert_no_write_fight({"RayService/up": 1})
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{describe(sampler)}") from exc
    finally:
        cell.close(("rayservice", "up"), ("rayservice", "late"))


def _unsuspended(cluster: Mapping[str, Any]) -> bool:
    return not (cluster.get("spec") or {}).get("suspend")


def _config_suspended(sampler: GateSampler, service: str) -> bool:
    spec = (sampler.current("RayService").get(service) or {}).get("spec") or {}
    return (spec.get("rayClusterConfig") or {}).get("suspend") is True


def _reason(cell: Cell, service: str) -> str:
    return str(
        ((cell.workload_of("RayService", service) or {}).get("status") or {}).get("pendingReason") or ""
    )


def _running(pods: list[Mapping[str, Any]], count: int) -> bool:
    return len(pods) == count and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


def _active(sampler: GateSampler, service: str) -> str | None:
    status = sampler.current("RayService")[service].get("status") or {}
    return (status.get("activeServiceStatus") or {}).get("rayClusterName") or None


def _warnings(cell: Cell, reason: str) -> list[dict[str, Any]]:
    out = cell.stage.kubectl(
        "get", "events", "-n", cell.ns, "--field-selector", f"reason={reason}", "-o", "json", check=False
    )
    return list(json.loads(out.stdout or "{}").get("items") or [])
