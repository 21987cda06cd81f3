"""Topology placement and waitForPodsReady beside KubeRay's real operator (v1.6.2), with
`rayquota run --no-reconcilers` as a new user starts it (its loopback webhooks on) (issue #36,
point 3).

Placement: on racks of kwok nodes under a topology flavor, a queued K8sJobMode RayJob, whose
submitter Job KubeRay writes from its default template, and a queued batch/v1 Job. The
submitter's pod is held by the pod webhook, the Job's by the gate the admission put into its
template; each is let through pinned to the host its admission assigned, per host as assigned;
the RayJob's cluster pods (KubeRay's) are held and pinned too.

Readiness: with waitForPodsReady on (timeout 12 s), a RayCluster whose KubeRay-made pods become
ready is marked PodsReady; one whose worker can never be scheduled is evicted (PodsReadyTimeout),
suspended and requeued, and admitted again after its backoff.

The gate sampler judges every state the API server stored (no pod before its admission, every
pod on its flavor, GPUs of live pods within the admitted quota), and no object's generation grows
without a user's change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.localcluster.cluster import LocalCluster
from rayquota.operator.core.timestamps import parse_rfc3339
from tests.e2e.beside_kuberay.harness import POOL
from tests.e2e.beside_kuberay.harness import cluster_spec as _cluster_spec
from tests.e2e.beside_kuberay.harness import queued as _queued
from tests.e2e.test_chart_install import LocalOperator
from tests.gate_invariants import FlavorPlacement
from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import Quota, gpu_job, pool_placement
from tests.integration.topology.conftest import POOL as RACK_POOL
from tests.integration.topology.conftest import RACK, READINESS, Racks
from tests.integration.topology.test_racks import REQUIRED, assigned_nodes
from tests.polling import wait_for

GATE = "rayquota.io/admission"
JOB_NAME = "batch.kubernetes.io/job-name"
TIMEOUT_S = float(READINESS["RAYQUOTA_PODS_READY_TIMEOUT"])


@pytest.fixture
def beside_with_readiness(
    kuberay_cluster: LocalCluster, kuberay_namespace: str, rayquota_crds: None, tmp_path: Path
) -> Iterator[LocalOperator]:
    """`rayquota run --no-reconcilers` with waitForPodsReady on (12 s, backoff from 4 s)."""
    operator = LocalOperator(
        kuberay_cluster.kubeconfig, kuberay_namespace, tmp_path, "--no-reconcilers", **READINESS
    )
    try:
        wait_for("rayquota's webhooks", lambda: "admission webhooks on" in operator.log(), 90)
        yield operator
    finally:
        out = operator.stop()
        assert operator.proc.returncode == 0, out[-4000:]


def _workload(sampler: GateSampler, prefix: str) -> Mapping[str, Any] | None:
    return next((w for n, w in sampler.current("Workload").items() if n.startswith(prefix)), None)


def _admitted(workload: Mapping[str, Any] | None) -> bool:
    return any(
        c.get("type") == "Admitted" and c.get("status") == "True"
        for c in ((workload or {}).get("status") or {}).get("conditions") or ()
    )


def _is(workload: Mapping[str, Any], prefix: str) -> bool:
    return str(workload["metadata"]["name"]).startswith(prefix)


def _of_job(pod: Mapping[str, Any], job: str) -> bool:
    return (pod["metadata"].get("labels") or {}).get(JOB_NAME) == job


def _running(pods: list[Mapping[str, Any]], count: int) -> list[Mapping[str, Any]] | None:
    up = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return up if len(up) == count else None


def _born_held(sampler: GateSampler, name: str) -> bool:
    first = sampler.first("Pod", lambda p: p["metadata"]["name"] == name)
    return first is not None and GATE in {g.get("name") for g in first["spec"].get("schedulingGates") or ()}


def _bound_off(pod: Mapping[str, Any], assigned: Mapping[str, int]) -> bool:
    node = pod["spec"].get("nodeName")
    return bool(node) and node not in assigned


def _rack_rayjob(namespace: str) -> dict[str, Any]:
    """K8sJobMode, no submitterPodTemplate (KubeRay builds its default submitter pod); one 1-GPU
    worker asking for a rack."""
    spec = _cluster_spec(1, 1)
    for group in spec["workerGroupSpecs"]:
        group["template"].setdefault("metadata", {})["annotations"] = {REQUIRED: RACK}
    return _queued(
        "RayJob",
        namespace,
        "rj",
        {
            "entrypoint": "python -c 'print(1)'",
            "submissionMode": "K8sJobMode",
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": spec,
        },
    )


@pytest.mark.usefixtures("kuberay_operator")
def test_submitter_and_job_pods_are_held_then_pinned_to_their_assigned_hosts_beside_kuberay(
    kuberay_cluster: LocalCluster, kuberay_namespace: str, rayquota_crds: None, tmp_path: Path
) -> None:
    cluster, namespace = kuberay_cluster, kuberay_namespace
    operator = LocalOperator(cluster.kubeconfig, namespace, tmp_path, "--no-reconcilers")
    quota = Quota(cluster, namespace)
    racks = Racks(cluster, namespace, quota)
    sampler: GateSampler | None = None
    try:
        wait_for("rayquota's webhooks", lambda: "admission webhooks on" in operator.log(), 90)
        racks.add("r0", 2)
        racks.add("r1", 2)
        cluster_queue = racks.queue(gpus=16)
        toleration = {"key": RACK_POOL, "operator": "Equal", "value": namespace, "effect": "NoSchedule"}
        placement = FlavorPlacement({RACK_POOL: namespace}, (toleration,))
        sampler = GateSampler(str(cluster.kubeconfig), namespace, cluster_queue, placement).start()
        job = gpu_job("train", "team", parallelism=2, completions=2, gpus=1)
        job["metadata"]["namespace"] = namespace
        job["spec"]["template"]["metadata"]["annotations"] = {REQUIRED: RACK}
        for manifest in (_rack_rayjob(namespace), job):
            cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
        rayjob_wl = wait_for(
            "the RayJob admitted", lambda: _admitted(w := _workload(sampler, "rayjob-rj-")) and w, 90
        )
        job_wl = wait_for(
            "the Job admitted", lambda: _admitted(w := _workload(sampler, "job-train-")) and w, 90
        )
        submitter_hosts = assigned_nodes(dict(rayjob_wl), "submitter")
        job_hosts = assigned_nodes(dict(job_wl))
        pods = sampler.current
        # KubeRay's default submitter pod is completed by kwok a second after it starts: found
        # bound in the sampler's history, not polled for Running.
        bound = wait_for(
            "KubeRay's submitter pod let through and bound",
            lambda: sampler.first("Pod", lambda p: _of_job(p, "rj") and bool(p["spec"].get("nodeName"))),
            180,
        )
        submitter = [bound]
        trains = wait_for(
            "the Job's 2 pods let through, Running",
            lambda: _running([p for p in pods("Pod").values() if _of_job(p, "train")], 2),
            120,
        )
        assert Counter(p["spec"]["nodeName"] for p in submitter) == Counter(submitter_hosts)
        assert Counter(p["spec"]["nodeName"] for p in trains) == Counter(job_hosts)
        assert all(_born_held(sampler, p["metadata"]["name"]) for p in [*submitter, *trains])
        sampler.sync()
        assert not sampler.ever("Pod", lambda p: _of_job(p, "rj") and _bound_off(p, submitter_hosts))
        assert not sampler.ever("Pod", lambda p: _of_job(p, "train") and _bound_off(p, job_hosts))
        sampler.assert_holds()
        sampler.assert_no_write_fight()
    finally:
        if sampler is not None:
            sampler.close()
        for kind, name in (("rayjob", "rj"), ("job", "train")):
            cluster.kubectl("delete", kind, name, "-n", namespace, "--wait=false", check=False)
        out = operator.stop()
        quota.delete_all()
        racks.delete()
    assert operator.proc.returncode == 0, out[-4000:]


def _evicted_for_readiness(workload: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Evicted" and c.get("status") == "True" and c.get("reason") == "PodsReadyTimeout"
        for c in (workload.get("status") or {}).get("conditions") or ()
    )


def _condition(workload: Mapping[str, Any] | None, kind: str) -> Mapping[str, Any]:
    conditions = ((workload or {}).get("status") or {}).get("conditions") or ()
    return next((c for c in conditions if c.get("type") == kind), {})


@pytest.mark.usefixtures("kuberay_operator")
def test_kuberay_made_pods_count_for_waitforpodsready_ready_marked_stuck_evicted_and_requeued(
    kuberay_cluster: LocalCluster, kuberay_namespace: str, beside_with_readiness: LocalOperator
) -> None:
    cluster, namespace = kuberay_cluster, kuberay_namespace
    quota = Quota(cluster, namespace)
    flavor = quota.flavor("a100", POOL)
    cluster_queue = quota.cluster_queue("team", {flavor: 4})
    quota.local_queue("team", cluster_queue)
    sampler = GateSampler(str(cluster.kubeconfig), namespace, cluster_queue, pool_placement(POOL)).start()
    stuck_spec = _cluster_spec(1, 1)
    # Its worker asks for a node label no node has: let through on the flavor, never scheduled.
    stuck_spec["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] = {"rayquota.io/no-such-node": "x"}
    manifests = [
        _queued("RayCluster", namespace, "fine", {**_cluster_spec(1, 1), "suspend": True}),
        _queued("RayCluster", namespace, "stuck", {**stuck_spec, "suspend": True}),
    ]
    try:
        for manifest in manifests:
            cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
        ready = wait_for(
            "the fine cluster's Workload PodsReady",
            lambda: (
                _condition(w := _workload(sampler, "raycluster-fine-"), "PodsReady").get("status") == "True"
                and w
            ),
            120,
        )
        assert _condition(ready, "PodsReady").get("reason") == "PodsReady"
        evicted = wait_for(
            "the stuck cluster evicted for readiness",
            lambda: sampler.first(
                "Workload", lambda w: _is(w, "raycluster-stuck-") and _evicted_for_readiness(w)
            ),
            120,
        )
        first_admitted = sampler.first("Workload", lambda w: _is(w, "raycluster-stuck-") and _admitted(w))
        admitted_at = parse_rfc3339(_condition(first_admitted, "Admitted").get("lastTransitionTime"))
        evicted_at = parse_rfc3339(_condition(evicted, "Evicted").get("lastTransitionTime"))
        assert admitted_at is not None and evicted_at is not None
        assert (evicted_at - admitted_at).total_seconds() >= TIMEOUT_S - 1  # not early
        # Suspended (KubeRay deletes its pods), requeued with a count, and admitted again.
        wait_for(
            "the stuck cluster suspended again",
            lambda: sampler.ever(
                "RayCluster",
                lambda c: (
                    c["metadata"]["name"] == "stuck"
                    and c["spec"].get("suspend") is True
                    and int(c["metadata"].get("generation") or 0) > 2
                ),
            ),
            60,
        )
        wait_for(
            "the stuck cluster admitted again after its backoff",
            lambda: sampler.first(
                "Workload",
                lambda w: (
                    _is(w, "raycluster-stuck-")
                    and _admitted(w)
                    and int(((w.get("status") or {}).get("requeueState") or {}).get("count") or 0) >= 1
                ),
            ),
            90,
        )
        fine_now = _workload(sampler, "raycluster-fine-")
        fine_evicted = sampler.ever(
            "Workload", lambda w: _is(w, "raycluster-fine-") and _evicted_for_readiness(w)
        )
        assert not fine_evicted
        assert _admitted(fine_now)
        sampler.assert_holds()
        sampler.assert_no_write_fight({"RayCluster/stuck": 8})
    finally:
        sampler.close()
        for manifest in manifests:
            cluster.kubectl(
                "delete",
                "raycluster",
                manifest["metadata"]["name"],
                "-n",
                namespace,
                "--wait=false",
                check=False,
            )
        quota.delete_all()
