from __future__ import annotations

import copy
import datetime as dt
import json
from typing import Any

import pytest

from rayquota.operator.ray.rayjob import submitter
from rayquota.operator.ray.rayjob.plan import DeletionAction, deadline_exceeded, deletion_actions
from rayquota.operator.ray.rayjob.validation import validate_rayjob
from tests.unit.ray.fixtures import cluster

BASE: dict[str, Any] = {
    "apiVersion": "ray.io/v1",
    "kind": "RayJob",
    "metadata": {"name": "job", "namespace": "ns", "uid": "uid-j"},
    "spec": {"entrypoint": "python main.py", "rayClusterSpec": cluster()["spec"]},
}


def rayjob(**spec: Any) -> dict[str, Any]:
    body = copy.deepcopy(BASE)
    body["spec"].update(spec)
    return {k: v for k, v in body.items()}


def test_valid_job_has_no_errors() -> None:
    assert validate_rayjob(rayjob()) == []


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"suspend": True}, "shutdownAfterJobFinishes"),
        ({"rayClusterSpec": None}, "one of spec.rayClusterSpec or spec.clusterSelector"),
        ({"clusterSelector": {"ray.io/cluster": "c"}}, "cannot both be set"),
        (
            {"rayClusterSpec": None, "clusterSelector": {"ray.io/cluster": "c"}, "backoffLimit": 2},
            "backoffLimit",
        ),
        ({"entrypoint": None}, "entrypoint is required"),
        ({"submissionMode": "HTTPMode", "submitterPodTemplate": {"spec": {}}}, "only used in K8sJobMode"),
        ({"runtimeEnvYAML": "- a list"}, "YAML mapping"),
        ({"entrypointResources": "{not json"}, "not valid JSON"),
        (
            {
                "shutdownAfterJobFinishes": True,
                "deletionStrategy": {"onSuccess": {"policy": "DeleteCluster"}},
            },
            # KubeRay accepts the legacy policies beside shutdownAfterJobFinishes (issue 34),
            # but only both of them.
            "needs both onSuccess and onFailure",
        ),
        (
            {"rayClusterSpec": {**cluster()["spec"], "upgradeStrategy": {"type": "Recreate"}}},
            "upgradeStrategy",
        ),
    ],
)
def test_invalid_jobs(spec: dict[str, Any], fragment: str) -> None:
    errors = validate_rayjob(rayjob(**spec))
    assert any(fragment in e for e in errors), errors


def test_interactive_mode_needs_no_entrypoint() -> None:
    assert validate_rayjob(rayjob(entrypoint=None, submissionMode="InteractiveMode")) == []


def test_long_names_rejected() -> None:
    body = rayjob()
    body["metadata"]["name"] = "x" * 48
    assert any("at most 47" in e for e in validate_rayjob(body))


def finished(job_status: str, deployment: str = "Complete", **spec: Any) -> dict[str, Any]:
    body = rayjob(**spec)
    body["status"] = {"jobStatus": job_status, "jobDeploymentStatus": deployment}
    return body


def test_shutdown_after_finish_deletes_cluster_after_ttl() -> None:
    body = finished("SUCCEEDED", shutdownAfterJobFinishes=True, ttlSecondsAfterFinished=30)
    assert deletion_actions(body) == [DeletionAction("DeleteCluster", 30)]
    assert deletion_actions(finished("SUCCEEDED")) == []
    running = finished("RUNNING", "Running", shutdownAfterJobFinishes=True)
    assert deletion_actions(running) == []


def test_deletion_rules_match_status() -> None:
    rules = {
        "deletionRules": [
            {"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED", "ttlSeconds": 0}},
            {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED", "ttlSeconds": 60}},
            {"policy": "DeleteSelf", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 10}},
            {"policy": "DeleteCluster", "condition": {"jobDeploymentStatus": "Failed", "ttlSeconds": 5}},
        ]
    }
    assert deletion_actions(finished("SUCCEEDED", deletionStrategy=rules)) == [
        DeletionAction("DeleteSelf", 10)
    ]
    assert deletion_actions(finished("FAILED", "Failed", deletionStrategy=rules)) == [
        DeletionAction("DeleteWorkers", 0),
        DeletionAction("DeleteCluster", 60),
        DeletionAction("DeleteCluster", 5),
    ]


def test_legacy_on_success_on_failure() -> None:
    strategy = {"onSuccess": {"policy": "DeleteSelf"}, "onFailure": {"policy": "DeleteNone"}}
    body = finished("SUCCEEDED", deletionStrategy=strategy, ttlSecondsAfterFinished=7)
    assert deletion_actions(body) == [DeletionAction("DeleteSelf", 7)]
    assert deletion_actions(finished("FAILED", "Failed", deletionStrategy=strategy)) == [
        DeletionAction("DeleteNone", 0)
    ]


def test_deadline() -> None:
    now = dt.datetime(2026, 1, 1, 0, 1, 0, tzinfo=dt.UTC)
    body = rayjob(activeDeadlineSeconds=60)
    body["status"] = {"jobDeploymentStatus": "Running", "startTime": "2026-01-01T00:00:00Z"}
    assert deadline_exceeded(body, now)
    assert not deadline_exceeded(body, now - dt.timedelta(seconds=1))
    body["status"]["jobDeploymentStatus"] = "Complete"
    assert not deadline_exceeded(body, now)


def test_submitter_job_like_kuberay() -> None:
    body = rayjob(
        runtimeEnvYAML="env_vars:\n  A: b\n",
        metadata={"team": "x"},
        entrypointNumCpus=1,
        submitterConfig={"backoffLimit": 5},
    )
    job = submitter.submitter_job(body, "job-abcde", "job-head-svc.ns.svc.cluster.local:8265", "ray:img")
    assert job["metadata"]["name"] == "job"
    assert job["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
    assert job["metadata"]["ownerReferences"][0]["uid"] == "uid-j"
    assert job["spec"]["backoffLimit"] == 5
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["restartPolicy"] == "Never"
    container = pod_spec["containers"][0]
    # The head's image, so the submitting `ray` CLI matches the cluster's Ray.
    assert (
        container["image"]
        == body["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
    )
    assert container["command"] == ["/bin/bash", "-ce", "--"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {
        "PYTHONUNBUFFERED": "1",
        "RAY_DASHBOARD_ADDRESS": "job-head-svc.ns.svc.cluster.local:8265",
        "RAY_JOB_SUBMISSION_ID": "job-abcde",
    }
    script = container["args"][0]
    wait, _, rest = script.partition("; done; ")
    assert wait.startswith("until python -c ") and "http://$RAY_DASHBOARD_ADDRESS/api/gcs_healthz" in wait
    assert rest.startswith("if ! ray job status")
    assert "--no-wait" in script and "--submission-id $RAY_JOB_SUBMISSION_ID -- python main.py" in script
    assert "--runtime-env-json" in script and json.dumps({"A": "b"}) in script
    assert "--entrypoint-num-cpus 1" in script
    assert script.endswith(
        "ray job logs --address http://$RAY_DASHBOARD_ADDRESS --follow $RAY_JOB_SUBMISSION_ID"
    )


def test_submitter_pod_template_is_respected() -> None:
    template = {
        "metadata": {"labels": {"x": "y"}},
        "spec": {"containers": [{"name": "mine", "image": "custom"}]},
    }
    job = submitter.submitter_job(rayjob(submitterPodTemplate=template), "id", "addr:8265", "ray:img")
    pod = job["spec"]["template"]
    assert pod["metadata"]["labels"]["x"] == "y"
    assert pod["spec"]["containers"][0]["image"] == "custom"
    assert pod["spec"]["containers"][0]["command"] == ["/bin/bash", "-ce", "--"]


def test_the_submitter_pod_template_carries_kuberay_v1_7_0s_labels_over_the_users() -> None:
    """KubeRay v1.7.0 (rayjob_controller.go, getSubmitterTemplate) stamps the RayJob's name, its
    kind and the operator on the submitter's pod template, over any the user gave (a
    NetworkPolicy admits the submitter by them); the user's other labels stay."""
    template = {
        "metadata": {"labels": {"x": "y", "ray.io/originated-from-crd": "mine"}},
        "spec": {"containers": [{"name": "mine", "image": "custom"}]},
    }
    job = submitter.submitter_job(rayjob(submitterPodTemplate=template), "id", "addr:8265", "ray:img")
    assert job["spec"]["template"]["metadata"]["labels"] == {
        "x": "y",
        "ray.io/originated-from-cr-name": "job",
        "ray.io/originated-from-crd": "RayJob",
        "app.kubernetes.io/created-by": "kuberay-operator",
        "ray.io/job-submitter": "true",
    }
    assert template["metadata"]["labels"]["ray.io/originated-from-crd"] == "mine"  # not changed in place
    default = submitter.submitter_job(rayjob(), "id", "addr:8265", "ray:img")["spec"]["template"]
    assert default["metadata"]["labels"]["ray.io/originated-from-cr-name"] == "job"


def test_job_submission_payload() -> None:
    body = rayjob(entrypointResources='{"accel": 1}', entrypointNumGpus=0.5, runtimeEnvYAML="pip: [requests]")
    payload = submitter.job_submission(body, "sub-1").to_payload()
    assert payload == {
        "entrypoint": "python main.py",
        "submission_id": "sub-1",
        "runtime_env": {"pip": ["requests"]},
        "entrypoint_num_gpus": 0.5,
        "entrypoint_resources": {"accel": 1.0},
    }


def test_submitter_job_finished() -> None:
    assert submitter.job_finished({"status": {}}) == (False, False)
    assert submitter.job_finished({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}) == (
        True,
        False,
    )
    assert submitter.job_finished({"status": {"conditions": [{"type": "Failed", "status": "True"}]}}) == (
        True,
        True,
    )


def test_sidecar_mode_puts_the_submitter_in_the_head_pod() -> None:
    from rayquota.operator.ray.rayjob.plan import cluster_manifest
    from rayquota.operator.ray.settings import DEFAULT_RAY_IMAGE

    body = rayjob(submissionMode="SidecarMode")
    body["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "a"}
    status = {"rayClusterName": "job-abcde", "jobId": "job-xyz12"}
    manifest = cluster_manifest(body, status, DEFAULT_RAY_IMAGE)
    assert manifest["metadata"]["name"] == "job-abcde"
    assert manifest["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
    assert manifest["metadata"]["annotations"] == {
        "team": "a",
        "ray.io/disable-provisioned-head-restart": "true",
    }
    assert manifest["metadata"]["ownerReferences"][0]["uid"] == "uid-j"
    head_spec = manifest["spec"]["headGroupSpec"]["template"]["spec"]
    assert head_spec["restartPolicy"] == "Never"
    sidecar = head_spec["containers"][-1]
    assert sidecar["name"] == "ray-job-submitter"
    env = {e["name"]: e["value"] for e in sidecar["env"]}
    assert env == {
        "PYTHONUNBUFFERED": "1",
        "RAY_DASHBOARD_ADDRESS": "127.0.0.1:8265",
        "RAY_JOB_SUBMISSION_ID": "job-xyz12",
    }
    assert "ray job submit" in sidecar["args"][0]
    # The RayJob's own spec is not modified.
    assert len(body["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]) == 1


@pytest.mark.parametrize(
    ("mode", "marked"), [("SidecarMode", "true"), ("K8sJobMode", None), ("HTTPMode", None), (None, None)]
)
def test_only_a_sidecar_mode_cluster_forbids_replacing_its_provisioned_head(
    mode: str | None, marked: str | None
) -> None:
    """KubeRay marks the RayCluster of a SidecarMode RayJob, and only it, with
    `ray.io/disable-provisioned-head-restart: "true"` (a new head would not run the job again),
    over the RayJob's own value; in the other modes that value is copied like any annotation."""
    from rayquota.operator.ray.rayjob.plan import cluster_manifest
    from rayquota.operator.ray.settings import DEFAULT_RAY_IMAGE

    key = "ray.io/disable-provisioned-head-restart"
    status = {"rayClusterName": "job-abcde", "jobId": "job-xyz12"}
    body = rayjob() if mode is None else rayjob(submissionMode=mode)
    assert cluster_manifest(body, status, DEFAULT_RAY_IMAGE)["metadata"]["annotations"].get(key) == marked
    body["metadata"]["annotations"] = {key: "false"}
    annotations = cluster_manifest(body, status, DEFAULT_RAY_IMAGE)["metadata"]["annotations"]
    assert annotations[key] == (marked or "false")


def test_a_sidecar_mode_clusters_lost_head_is_not_replaced_once_provisioned() -> None:
    """The RayJob side and the RayCluster side together: the cluster a SidecarMode RayJob creates,
    once provisioned, gets no new head when its head pod is gone."""
    from rayquota.operator.ray.raycluster.plan import plan_cluster
    from rayquota.operator.ray.rayjob.plan import cluster_manifest
    from rayquota.operator.ray.settings import DEFAULT_RAY_IMAGE

    status = {"rayClusterName": "job-abcde", "jobId": "job-xyz12"}
    for mode, heads_made in (("SidecarMode", 0), ("K8sJobMode", 1)):
        made = cluster_manifest(rayjob(submissionMode=mode), status, DEFAULT_RAY_IMAGE)
        made["metadata"]["uid"] = "uid-c"  # as the API server gives it
        made["status"] = {"conditions": [{"type": "RayClusterProvisioned", "status": "True"}]}
        plan = plan_cluster(made, [], "v1")
        heads = [p for p in plan.create if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
        assert (mode, len(heads)) == (mode, heads_made)
