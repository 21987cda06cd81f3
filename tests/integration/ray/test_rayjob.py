"""RayJob end to end: the RayCluster on kwok nodes, the Ray job itself on a real local Ray head."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.operator.config import OperatorConfig
from rayquota.operator.ray.dashboard_api.dashboard import JobStatus, JobSubmission, RayDashboardClient
from tests.integration.ray.kubehelpers import Kube, wait_for

pytestmark = pytest.mark.ray

CLUSTER_SPEC: dict[str, Any] = {
    "headGroupSpec": {
        "rayStartParams": {},
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "ray-head",
                        "image": "rayproject/ray:2.41.0",
                        "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
                    }
                ]
            }
        },
    },
    "workerGroupSpecs": [
        {
            "groupName": "cpu",
            "replicas": 1,
            "minReplicas": 1,
            "maxReplicas": 1,
            "rayStartParams": {},
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "ray-worker",
                            "image": "rayproject/ray:2.41.0",
                            "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
                        }
                    ]
                }
            },
        }
    ],
}


# The submitter pod stays Running until the test has executed its command (kwok would
# otherwise complete it at once, before anything was submitted).
MANUAL_SUBMITTER = {
    "metadata": {"labels": {"rayquota.io/kwok-manual-completion": "true"}},
    "spec": {"containers": [{"name": "submitter", "image": "rayproject/ray:2.41.0"}]},
}


def rayjob(name: str, entrypoint: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {"entrypoint": entrypoint, "rayClusterSpec": CLUSTER_SPEC, **spec},
    }
    return body


@pytest.fixture
def kube(control_plane: Any, namespace: str, ray_operator: OperatorConfig, local_dashboard: str) -> Kube:
    return Kube(control_plane, namespace)


def job_state(kube: Kube, name: str) -> dict[str, Any]:
    return (kube.get("rayjob", name) or {}).get("status") or {}


def wait_deployment(kube: Kube, name: str, states: set[str], timeout_s: float = 90.0) -> dict[str, Any]:
    return wait_for(
        f"RayJob {name} in {states}",
        lambda: (s := job_state(kube, name)) and s.get("jobDeploymentStatus") in states and s,
        timeout_s,
    )


def rayjob_on_shared_cluster(kube: Kube, name: str, entrypoint: str) -> dict[str, Any]:
    """An HTTPMode RayJob on an existing RayCluster `shared` (created here, waited for ready)."""
    if kube.get("raycluster", "shared") is None:
        kube.apply(
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayCluster",
                "metadata": {"name": "shared"},
                "spec": CLUSTER_SPEC,
            }
        )
    wait_for(
        "shared cluster ready",
        lambda: (kube.get("raycluster", "shared") or {}).get("status", {}).get("state") == "ready",
    )
    body = rayjob(name, entrypoint, submissionMode="HTTPMode", clusterSelector={"ray.io/cluster": "shared"})
    del body["spec"]["rayClusterSpec"]
    return body


def ray(url: str, coro_fn: Any) -> Any:
    async def run() -> Any:
        async with RayDashboardClient(url) as client:
            return await coro_fn(client)

    return asyncio.run(run())


def test_http_mode_runs_the_entrypoint_for_real(kube: Kube, local_dashboard: str) -> None:
    kube.apply(
        rayjob(
            "http-job",
            "python -c \"import os; print('hello from', os.environ['WHO'])\"",
            submissionMode="HTTPMode",
            runtimeEnvYAML="env_vars:\n  WHO: rayquota\n",
        )
    )
    status = wait_deployment(kube, "http-job", {"Complete", "Failed"})
    assert status["jobDeploymentStatus"] == "Complete" and status["jobStatus"] == "SUCCEEDED"
    assert status["jobId"].startswith("http-job-") and status["succeeded"] == 1
    assert status["dashboardURL"] == local_dashboard.removeprefix("http://")
    assert status["startTime"] <= status["endTime"]
    assert status["rayJobInfo"]["startTime"] and status["rayJobInfo"]["endTime"]

    cluster = kube.get("raycluster", status["rayClusterName"])
    assert cluster is not None and cluster["metadata"]["name"].startswith("http-job-")
    assert cluster["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
    assert cluster["metadata"]["labels"]["ray.io/originated-from-cr-name"] == "http-job"
    assert cluster["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    logs = ray(local_dashboard, lambda c: c.get_job_logs(status["jobId"]))
    assert "hello from rayquota" in logs


def run_submitter_pod_locally(pod: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """Play the kwok node: run the submitter container's command here, against the local head."""
    container = pod["spec"]["containers"][0]
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    # `bash -l` would reset PATH from the system profile, where this venv's `ray` is not found.
    command = ["-c" if part == "-lc" else part for part in container["command"]]
    return subprocess.run(
        [*command, *container["args"]], env=env, capture_output=True, text=True, timeout=180
    )


def test_k8s_job_mode_submitter_runs_the_entrypoint(kube: Kube) -> None:
    kube.apply(
        rayjob(
            "k8s-job",
            "python -c \"print('hello from the submitter')\"",
            submissionMode="K8sJobMode",
            submitterPodTemplate=MANUAL_SUBMITTER,
        )
    )
    status = wait_deployment(kube, "k8s-job", {"Running"})
    job = kube.get("job", "k8s-job")
    assert job is not None and job["metadata"]["ownerReferences"][0]["name"] == "k8s-job"
    pod = wait_for(
        "submitter pod running",
        lambda: [p for p in kube.list("pods", "job-name=k8s-job") if p["status"].get("phase") == "Running"],
    )[0]
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["RAY_JOB_SUBMISSION_ID"] == status["jobId"]
    assert "ray job submit" in pod["spec"]["containers"][0]["args"][0]

    result = run_submitter_pod_locally(pod)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "hello from the submitter" in result.stdout
    finished = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    kube.patch_status(
        "pod",
        pod["metadata"]["name"],
        {
            "status": {
                "phase": "Succeeded",
                "containerStatuses": [
                    {
                        "name": "submitter",
                        "image": "rayproject/ray:2.41.0",
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {
                            "terminated": {
                                "exitCode": 0,
                                "reason": "Completed",
                                "startedAt": finished,
                                "finishedAt": finished,
                            }
                        },
                    }
                ],
            }
        },
    )
    status = wait_deployment(kube, "k8s-job", {"Complete", "Failed"})
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED")
    wait_for(
        "submitter Job complete",
        lambda: any(
            c["type"] == "Complete" and c["status"] == "True"
            for c in (kube.get("job", "k8s-job").get("status") or {}).get("conditions", [])
        ),
    )


def test_failing_entrypoint_fails_after_backoff_limit_retries(kube: Kube, local_dashboard: str) -> None:
    kube.apply(
        rayjob("failing", "python -c 'import sys; sys.exit(1)'", submissionMode="HTTPMode", backoffLimit=1)
    )
    status = wait_deployment(kube, "failing", {"Complete", "Failed"}, timeout_s=120)
    assert (status["jobDeploymentStatus"], status["jobStatus"], status["reason"]) == (
        "Failed",
        "FAILED",
        "AppFailed",
    )
    assert status["failed"] == 2
    created = [e["message"] for e in kube.events("failing") if e["reason"] == "CreatedRayCluster"]
    assert len(created) == 2 and len(set(created)) == 2  # a new cluster per attempt
    jobs = ray(local_dashboard, lambda c: c.list_jobs())
    attempts = [j for j in jobs if (j.submission_id or "").startswith("failing-")]
    assert len(attempts) == 2 and all(j.status == JobStatus.FAILED for j in attempts)
    # The first attempt's cluster is gone; only the last one remains.
    assert [c["metadata"]["name"] for c in kube.list("rayclusters")] == [status["rayClusterName"]]


def test_active_deadline_exceeded_stops_the_job(kube: Kube, local_dashboard: str) -> None:
    kube.apply(rayjob("deadline", "python -c 'import time; time.sleep(600)'", submissionMode="HTTPMode"))
    running = wait_for(
        "Ray job running", lambda: (s := job_state(kube, "deadline")).get("jobStatus") == "RUNNING" and s
    )
    # The deadline counts from startTime; set it a few seconds ahead of now, so it passes while
    # the Ray job runs however long the cluster took to come up on a busy machine.
    started = dt.datetime.fromisoformat(running["startTime"])
    deadline_s = int((dt.datetime.now(dt.UTC) - started).total_seconds()) + 5
    kube.patch("rayjob", "deadline", {"spec": {"activeDeadlineSeconds": deadline_s}})
    status = wait_deployment(kube, "deadline", {"Complete", "Failed"}, timeout_s=60)
    assert (status["jobDeploymentStatus"], status["reason"]) == ("Failed", "DeadlineExceeded")
    elapsed = dt.datetime.fromisoformat(status["endTime"]) - dt.datetime.fromisoformat(status["startTime"])
    assert elapsed.total_seconds() >= deadline_s
    wait_for(
        "Ray job stopped",
        lambda: (
            ray(local_dashboard, lambda c: c.get_job(running["jobId"])).status
            in (JobStatus.STOPPED, JobStatus.FAILED)
        ),
    )


def test_suspend_and_resume(kube: Kube, local_dashboard: str) -> None:
    kube.apply(
        rayjob(
            "pausable",
            "python -c 'import time; time.sleep(12); print(\"finished\")'",
            submissionMode="HTTPMode",
            suspend=True,
            shutdownAfterJobFinishes=True,
        )
    )
    wait_deployment(kube, "pausable", {"Suspended"})
    assert kube.list("rayclusters") == []

    kube.patch("rayjob", "pausable", {"spec": {"suspend": False}})
    first = wait_for(
        "running", lambda: (s := job_state(kube, "pausable")).get("jobStatus") == "RUNNING" and s
    )
    kube.patch("rayjob", "pausable", {"spec": {"suspend": True}})
    wait_deployment(kube, "pausable", {"Suspended"})
    wait_for("cluster deleted", lambda: kube.list("rayclusters") == [])
    stopped = (JobStatus.STOPPED, JobStatus.FAILED)
    wait_for(
        "first attempt stopped",
        lambda: ray(local_dashboard, lambda c: c.get_job(first["jobId"])).status in stopped,
    )

    kube.patch("rayjob", "pausable", {"spec": {"suspend": False}})
    status = wait_deployment(kube, "pausable", {"Complete", "Failed"}, timeout_s=120)
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED")
    assert status["jobId"] != first["jobId"]


def test_shutdown_after_job_finishes_deletes_cluster_after_ttl(kube: Kube) -> None:
    kube.apply(
        rayjob(
            "ttl",
            "python -c 'print(1)'",
            submissionMode="HTTPMode",
            shutdownAfterJobFinishes=True,
            ttlSecondsAfterFinished=4,
        )
    )
    status = wait_deployment(kube, "ttl", {"Complete", "Failed"})
    assert status["jobDeploymentStatus"] == "Complete"
    wait_for(
        "cluster deleted", lambda: kube.get("raycluster", status["rayClusterName"]) is None, timeout_s=60
    )
    # The event is written after the deletion it tells of (the operator's event writer may lag).
    events = kube.events_once("ttl", lambda es: any(e["reason"] == "DeletedRayCluster" for e in es))
    [deleted] = [e for e in events if e["reason"] == "DeletedRayCluster"]
    waited = dt.datetime.fromisoformat(deleted["firstTimestamp"]) - dt.datetime.fromisoformat(
        status["endTime"]
    )
    assert waited.total_seconds() >= 3  # timestamps have one-second resolution


def test_interactive_mode_waits_for_job_id(kube: Kube, local_dashboard: str) -> None:
    body = rayjob("interactive", "", submissionMode="InteractiveMode")
    del body["spec"]["entrypoint"]
    kube.apply(body)
    wait_deployment(kube, "interactive", {"Waiting"})
    submission_id = f"interactive-{kube.ns}"
    ray(
        local_dashboard,
        lambda c: c.submit_job(JobSubmission(entrypoint="python -c 'print(2)'", submission_id=submission_id)),
    )
    kube.patch("rayjob", "interactive", {"spec": {"jobId": submission_id}})
    status = wait_deployment(kube, "interactive", {"Complete", "Failed"})
    assert (status["jobDeploymentStatus"], status["jobId"]) == ("Complete", submission_id)


def test_validation_failure(kube: Kube) -> None:
    kube.apply(
        rayjob("invalid", "python -c 'print(1)'", suspend=True)
    )  # suspend needs shutdownAfterJobFinishes
    status = wait_deployment(kube, "invalid", {"ValidationFailed"})
    assert status["reason"] == "ValidationFailed" and "shutdownAfterJobFinishes" in status["message"]
    assert [e["type"] for e in kube.events("invalid") if e["reason"] == "InvalidRayJobSpec"] == ["Warning"]
    assert kube.list("rayclusters") == []


def test_deleting_a_running_rayjob_stops_its_ray_job(kube: Kube, local_dashboard: str) -> None:
    kube.apply(rayjob("doomed", "python -c 'import time; time.sleep(600)'", submissionMode="HTTPMode"))
    status = wait_for("running", lambda: (s := job_state(kube, "doomed")).get("jobStatus") == "RUNNING" and s)
    kube.kubectl("delete", "rayjob", "doomed", "--wait=false")
    wait_for(
        "Ray job stopped",
        lambda: (
            ray(local_dashboard, lambda c: c.get_job(status["jobId"])).status
            in (JobStatus.STOPPED, JobStatus.FAILED)
        ),
    )
    wait_for(
        "RayJob and its cluster gone",
        lambda: (
            kube.get("rayjob", "doomed") is None and kube.get("raycluster", status["rayClusterName"]) is None
        ),
        timeout_s=60,
    )


def test_cluster_selector_uses_an_existing_cluster(kube: Kube) -> None:
    kube.apply(rayjob_on_shared_cluster(kube, "on-shared", "python -c 'print(3)'"))
    status = wait_deployment(kube, "on-shared", {"Complete", "Failed"})
    assert (status["jobDeploymentStatus"], status["rayClusterName"]) == ("Complete", "shared")
    assert [c["metadata"]["name"] for c in kube.list("rayclusters")] == ["shared"]  # none created


def test_deletion_rules_delete_workers_then_self(kube: Kube) -> None:
    SELF_TTL_S = 30
    rules = {
        "deletionRules": [
            {"policy": "DeleteWorkers", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 0}},
            # Long enough that the test sees the workers go before the RayJob deletes itself,
            # even when each kubectl call takes seconds on a loaded machine.
            {"policy": "DeleteSelf", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": SELF_TTL_S}},
        ]
    }
    kube.apply(rayjob("rules", "python -c 'print(4)'", submissionMode="HTTPMode", deletionStrategy=rules))
    status = wait_deployment(kube, "rules", {"Complete", "Failed"})
    assert status["jobDeploymentStatus"] == "Complete"
    cluster_name = status["rayClusterName"]
    wait_for(
        "workers deleted, head kept",
        lambda: [p["metadata"]["labels"]["ray.io/node-type"] for p in kube.pods(cluster_name)] == ["head"],
    )
    rayjob_now = kube.get("rayjob", "rules")
    assert rayjob_now is not None  # DeleteSelf waits for its own ttl
    ended = dt.datetime.fromisoformat(rayjob_now["status"]["endTime"].replace("Z", "+00:00"))
    wait_for("RayJob deleted itself", lambda: kube.get("rayjob", "rules") is None, timeout_s=SELF_TTL_S + 60)
    gone = dt.datetime.now(dt.UTC)
    assert (gone - ended).total_seconds() >= SELF_TTL_S, "DeleteSelf fired before its ttl"


def test_k8s_job_mode_submitter_failure_fails_the_rayjob(kube: Kube) -> None:
    kube.apply(
        rayjob(
            "broken-submitter",
            "python -c 'print(5)'",
            submitterPodTemplate=MANUAL_SUBMITTER,
            submitterConfig={"backoffLimit": 0},
        )
    )
    wait_deployment(kube, "broken-submitter", {"Running"})
    pod = wait_for(
        "submitter pod running",
        lambda: [
            p for p in kube.list("pods", "job-name=broken-submitter") if p["status"].get("phase") == "Running"
        ],
    )[0]
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    terminated = {"exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now}
    container_status = {
        "name": "submitter",
        "image": "rayproject/ray:2.41.0",
        "imageID": "",
        "ready": False,
        "restartCount": 0,
        "state": {"terminated": terminated},
    }
    kube.patch_status(
        "pod",
        pod["metadata"]["name"],
        {"status": {"phase": "Failed", "containerStatuses": [container_status]}},
    )
    status = wait_deployment(kube, "broken-submitter", {"Complete", "Failed"})
    assert (status["jobDeploymentStatus"], status["reason"]) == ("Failed", "SubmissionFailed")
    assert status["failed"] == 1


@pytest.mark.parametrize(
    ("deletion", "field", "message"),
    [
        (
            {"onSuccess": {"policy": "DeleteWorkers"}, "onFailure": {"policy": "DeleteCluster"}},
            "spec.deletionStrategy",
            "DeletionStrategy=DeleteWorkers currently does not support RayCluster with autoscaling enabled",
        ),
        (
            {"deletionRules": [{"policy": "DeleteWorkers", "condition": {"jobStatus": "SUCCEEDED"}}]},
            "spec.deletionStrategy.deletionRules",
            "DeletionPolicyType 'DeleteWorkers' not supported with autoscaling enabled",
        ),
    ],
)
def test_delete_workers_on_an_autoscaling_cluster_is_refused_at_submission(
    control_plane: Any,
    namespace: str,
    crds_installed: None,
    deletion: dict[str, Any],
    field: str,
    message: str,
) -> None:
    """The API server refuses it (KubeRay v1.7.0's rule and reason), naming the field: nothing is
    stored, so no cluster is ever made for it."""
    kube = Kube(control_plane, namespace)
    body = rayjob("scaling", "python -c pass", deletionStrategy=deletion, shutdownAfterJobFinishes=True)
    body["spec"]["rayClusterSpec"] = dict(CLUSTER_SPEC, enableInTreeAutoscaling=True)
    refused = kube.kubectl("apply", "-f", "-", input=yaml.safe_dump(body), check=False)
    assert refused.returncode != 0
    assert f"{field}: Invalid value" in refused.stderr and message in refused.stderr, refused.stderr
    assert kube.get("rayjob", "scaling") is None
    # The same job without autoscaling is accepted.
    body["spec"]["rayClusterSpec"] = dict(CLUSTER_SPEC, enableInTreeAutoscaling=False)
    kube.kubectl("apply", "-f", "-", "--dry-run=server", input=yaml.safe_dump(body))
