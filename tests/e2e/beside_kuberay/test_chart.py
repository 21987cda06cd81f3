"""Admission-only mode installed with the chart beside KubeRay's real operator (v1.6.2, built
from the Go module proxy).

A control plane of its own plays a cluster that already runs KubeRay: KubeRay's CRDs, KubeRay's
operator reconciling the ray.io objects. The chart goes in with `reconcilers.enabled=false`
(bringing only the rayquota.io CRDs), and rayquota runs with the chart's ServiceAccount token.
A queued RayCluster stays suspended, so KubeRay creates no pod, until its quota is admitted;
then KubeRay runs it. One over quota never gets a pod. (This file runs before the package's
shared stage exists: its own rayquota and KubeRay watch a namespace of their own.)
"""

from __future__ import annotations

from pathlib import Path

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
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([fits, too_big]))
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
        assert "components: queue" in operator.log()
    finally:
        out = operator.stop()
        quota.delete()
        helm("uninstall", "rq", "-n", namespace, "--wait", cluster=cluster)
    assert operator.proc.returncode == 0, out[-4000:]
    assert_only_declared_requests(operator, declared_grants(reconcilers=False, self_issued_cert=False), out)
