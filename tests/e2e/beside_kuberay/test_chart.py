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

from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.localcluster.cluster import LocalCluster
from tests.e2e.chart import CHART, helm, service_account_kubeconfig
from tests.e2e.test_chart_install import LocalOperator, assert_only_declared_requests, declared_grants
from tests.polling import wait_for
from tests.quota import Quota, admitted_workload, cluster_pods, get_json, pending_workload, sample_cluster


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
