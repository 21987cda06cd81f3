"""`kubectl rayquota ...` through the real kubectl binary, which finds the plugin
(kubectl-rayquota, installed into the virtualenv's bin by `make venv`) on PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rayquota.localcluster import binaries
from rayquota.localcluster.cluster import LocalCluster
from tests.polling import wait_for

SCRIPTS = Path(sys.executable).parent
# `kubectl rayquota ARGS...`, with what it reads on stdin and the exit code it must end with.
Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def kubectl_rayquota(control_plane: LocalCluster) -> Run:
    if not (SCRIPTS / "kubectl-rayquota").exists():
        pytest.fail(f"kubectl-rayquota is not installed in {SCRIPTS}: run `make venv`")
    env = dict(
        os.environ,
        KUBECONFIG=str(control_plane.kubeconfig),
        PATH=f"{binaries.KUBERNETES.cache_dir}:{SCRIPTS}:{os.environ.get('PATH', '')}",
    )

    def run(*args: str, stdin: str | None = None, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["kubectl", "rayquota", *args], env=env, input=stdin, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == code, f"kubectl rayquota {' '.join(args)}: {done.stderr}"
        return done

    return run


def _cluster_queue(cluster: LocalCluster, name: str) -> dict[str, Any]:
    got = cluster.kubectl("get", "clusterqueues.rayquota.io", name, "-o", "json")
    return dict(json.loads(got.stdout))


def test_create_list_stop_and_resume_queues(
    control_plane: LocalCluster, namespace: str, kubectl_rayquota: Run
) -> None:
    run = kubectl_rayquota
    cq = f"cq-{namespace}"
    created = run(
        "create", "clusterqueue", cq, "--cohort", "research",
        "--nominal-quota", "gpu-a:cpu=8;nvidia.com/gpu=4",
        "--borrowing-limit", "gpu-a:cpu=2;nvidia.com/gpu=1",
    )  # fmt: skip
    try:
        assert f"clusterqueue.rayquota.io/{cq} created" in created.stdout
        spec = _cluster_queue(control_plane, cq)["spec"]
        assert spec["cohort"] == "research"
        assert spec["resourceGroups"][0]["flavors"][0]["resources"] == [
            {"name": "cpu", "nominalQuota": "8", "borrowingLimit": "2"},
            {"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "1"},
        ]

        rf = f"rf-{namespace}"
        run("create", "resourceflavor", rf, "--node-labels", "pool=gpu", "--node-taints", "spot:NoSchedule")
        flavor = json.loads(
            control_plane.kubectl("get", "resourceflavors.rayquota.io", rf, "-o", "json").stdout
        )
        listed_flavors = run("list", "rf").stdout.splitlines()
        assert [line.split()[:2] for line in listed_flavors if line.startswith(rf + " ")] == [
            [rf, "pool=gpu"]
        ]
        control_plane.kubectl("delete", "resourceflavors.rayquota.io", rf, "--wait=false")
        assert flavor["spec"]["nodeLabels"] == {"pool": "gpu"}
        assert flavor["spec"]["nodeTaints"] == [{"key": "spot", "effect": "NoSchedule"}]

        lq = run("create", "localqueue", "team", "-c", cq, "-n", namespace)
        assert "localqueue.rayquota.io/team created" in lq.stdout
        got = control_plane.kubectl("get", "localqueues.rayquota.io", "team", "-n", namespace, "-o", "json")
        assert json.loads(got.stdout)["spec"]["clusterQueue"] == cq

        listed = json.loads(run("list", "clusterqueue", "-o", "json").stdout)
        assert listed["kind"] == "List"
        mine = [i for i in listed["items"] if i["metadata"]["name"] == cq]
        assert len(mine) == 1 and mine[0]["spec"]["cohort"] == "research"
        table = run("list", "localqueue", "--namespace", namespace).stdout
        assert table.splitlines()[0].split()[:2] == ["NAME", "CLUSTERQUEUE"]
        assert table.splitlines()[1].split()[:2] == ["team", cq]

        run("stop", "clusterqueue", cq)
        assert _cluster_queue(control_plane, cq)["spec"]["stopPolicy"] == "HoldAndDrain"
        run("stop", "cq", cq, "--keep-already-running")
        assert _cluster_queue(control_plane, cq)["spec"]["stopPolicy"] == "Hold"
        run("resume", "clusterqueue", cq)
        assert _cluster_queue(control_plane, cq)["spec"]["stopPolicy"] == "None"

        run("stop", "localqueue", "team", "-n", namespace)
        got = control_plane.kubectl("get", "localqueues.rayquota.io", "team", "-n", namespace, "-o", "json")
        assert json.loads(got.stdout)["spec"]["stopPolicy"] == "HoldAndDrain"
    finally:
        control_plane.kubectl("delete", "clusterqueues.rayquota.io", cq, "--wait=false", check=False)


def test_stop_resume_and_delete_a_workload_with_its_owner(
    control_plane: LocalCluster, namespace: str, kubectl_rayquota: Run
) -> None:
    run = kubectl_rayquota
    control_plane.kubectl("create", "configmap", "job-owner", "-n", namespace)
    uid = control_plane.kubectl(
        "get", "configmap", "job-owner", "-n", namespace, "-o", "jsonpath={.metadata.uid}"
    ).stdout
    workload = {
        "apiVersion": "rayquota.io/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": "wl",
            "namespace": namespace,
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "job-owner", "uid": uid}],
        },
        "spec": {"queueName": "team", "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "1"}}]},
    }
    control_plane.kubectl("create", "-f", "-", input=json.dumps(workload))

    def active() -> object:
        got = control_plane.kubectl("get", "workloads.rayquota.io", "wl", "-n", namespace, "-o", "json")
        return json.loads(got.stdout)["spec"]["active"]

    run("stop", "workload", "wl", "-n", namespace)
    assert active() is False
    run("resume", "wl", "wl", "-n", namespace)
    assert active() is True

    listed = run("list", "workload", "-n", namespace, "--status", "pending").stdout
    assert listed.splitlines()[1].split()[:4] == ["wl", "configmap", "job-owner", "team"]

    owned = run("list", "wl", "-n", namespace, "--for", "configmap/job-owner", "-o", "name").stdout
    assert owned.split() == ["workload.rayquota.io/wl"]
    nothing = run("list", "wl", "-n", namespace, "--field-selector", "metadata.name=other")
    assert nothing.stdout == "" and "No resources found" in nothing.stderr
    views = json.loads(run("workloads", "--namespace", namespace, "-o", "json").stdout)
    assert [i["metadata"]["name"] for i in views["items"]] == ["wl"]
    explained = run("explain", "workload/wl", "-n", namespace, "-o", "yaml").stdout
    assert "target: workload/wl" in explained and f"namespace: {namespace}" in explained
    context = control_plane.kubectl("config", "current-context").stdout.strip()
    assert "wl" in run("workloads", "-n", namespace, "--context", context).stdout
    unknown = run("workloads", "--context", "no-such-context", code=2)
    assert "--context 'no-such-context'" in unknown.stderr

    refused = run("delete", "workload", "wl", "-n", namespace, stdin="n\n")
    assert "configmap/job-owner associated with the" in refused.stdout
    assert "Deletion is canceled" in refused.stdout
    assert (
        control_plane.kubectl("get", "configmap", "job-owner", "-n", namespace, check=False).returncode == 0
    )

    deleted = run("delete", "workload", "wl", "-n", namespace, "--yes")
    assert "configmap/job-owner deleted" in deleted.stdout
    assert (
        control_plane.kubectl("get", "configmap", "job-owner", "-n", namespace, check=False).returncode != 0
    )
    wait_for(
        "the garbage collector to delete the Workload of the deleted owner",
        lambda: (
            control_plane.kubectl(
                "get", "workloads.rayquota.io", "wl", "-n", namespace, check=False
            ).returncode
            != 0
        ),
        timeout_s=120,
        interval_s=1,
    )


def test_kueue_api_mode_creates_kueue_queues(
    control_plane: LocalCluster, namespace: str, kubectl_rayquota: Run
) -> None:
    """With --queue-api kueue the same verbs write kueue.x-k8s.io/v1beta2 objects, which Kueue's
    own CRD schemas accept (cohortName, not cohort)."""
    from rayquota.localcluster import kueue_crds

    kueue_crds.install(control_plane)
    run = kubectl_rayquota
    cq = f"kcq-{namespace}"
    created = run(
        "create", "cq", cq, "--queue-api", "kueue", "--cohort", "research",
        "--nominal-quota", "gpu-a:cpu=8;nvidia.com/gpu=4", "--lending-limit", "gpu-a:cpu=1;nvidia.com/gpu=1",
    )  # fmt: skip
    try:
        assert f"clusterqueue.kueue.x-k8s.io/{cq} created" in created.stdout
        got = json.loads(
            control_plane.kubectl("get", "clusterqueues.kueue.x-k8s.io", cq, "-o", "json").stdout
        )
        assert got["spec"]["cohortName"] == "research"
        assert got["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1] == {
            "name": "nvidia.com/gpu",
            "nominalQuota": "4",
            "lendingLimit": "1",
        }
        run("create", "lq", "team", "-c", cq, "-n", namespace, "--queue-api", "kueue")
        lq = control_plane.kubectl("get", "localqueues.kueue.x-k8s.io", "team", "-n", namespace, "-o", "json")
        assert json.loads(lq.stdout)["spec"]["clusterQueue"] == cq
        run("stop", "cq", cq, "--queue-api", "kueue", "--keep-already-running")
        got = json.loads(
            control_plane.kubectl("get", "clusterqueues.kueue.x-k8s.io", cq, "-o", "json").stdout
        )
        assert got["spec"]["stopPolicy"] == "Hold"
        queues = run("queues", "--queue-api", "kueue", "-o", "name").stdout
        assert f"clusterqueue.kueue.x-k8s.io/{cq}" in queues.splitlines()
    finally:
        control_plane.kubectl("delete", "clusterqueues.kueue.x-k8s.io", cq, "--wait=false", check=False)
