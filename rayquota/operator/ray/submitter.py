"""How a RayJob's entrypoint reaches Ray: the dashboard submission, the K8sJobMode submitter Job
and the SidecarMode submitter container, built like KubeRay's."""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Mapping
from typing import Any

import yaml

from rayquota.operator.ray import labels
from rayquota.operator.ray.dashboard import JobSubmission

SUBMITTER_CONTAINER = "ray-job-submitter"
DEFAULT_SUBMITTER_BACKOFF_LIMIT = 2


def runtime_env(rayjob: Mapping[str, Any]) -> dict[str, Any] | None:
    text = rayjob.get("spec", {}).get("runtimeEnvYAML")
    if not text:
        return None
    parsed = yaml.safe_load(text)
    if not isinstance(parsed, dict):
        raise ValueError("spec.runtimeEnvYAML must be a YAML mapping")
    return parsed


def entrypoint_resources(rayjob: Mapping[str, Any]) -> dict[str, float] | None:
    text = rayjob.get("spec", {}).get("entrypointResources")
    if not text:
        return None
    parsed = json.loads(text)
    if not isinstance(parsed, dict):
        raise ValueError("spec.entrypointResources must be a JSON object")
    return {str(k): float(v) for k, v in parsed.items()}


def job_submission(rayjob: Mapping[str, Any], submission_id: str) -> JobSubmission:
    spec = rayjob.get("spec") or {}
    return JobSubmission(
        entrypoint=str(spec.get("entrypoint") or ""),
        submission_id=submission_id,
        runtime_env=runtime_env(rayjob),
        metadata=spec.get("metadata") or None,
        entrypoint_num_cpus=spec.get("entrypointNumCpus"),
        entrypoint_num_gpus=spec.get("entrypointNumGpus"),
        entrypoint_resources=entrypoint_resources(rayjob),
    )


def submit_script(rayjob: Mapping[str, Any]) -> str:
    """Shell script: submit once (a restarted submitter finds the job and does not resubmit),
    then follow the logs until the job ends, so the pod's exit tracks the job."""
    spec = rayjob.get("spec") or {}
    address = "http://$RAY_DASHBOARD_ADDRESS"
    submit = ["ray", "job", "submit", "--address", address, "--no-wait"]
    env = runtime_env(rayjob)
    if env:
        submit += ["--runtime-env-json", json.dumps(env, sort_keys=True)]
    if spec.get("metadata"):
        submit += ["--metadata-json", json.dumps(spec["metadata"], sort_keys=True)]
    if spec.get("entrypointNumCpus") is not None:
        submit += ["--entrypoint-num-cpus", str(spec["entrypointNumCpus"])]
    if spec.get("entrypointNumGpus") is not None:
        submit += ["--entrypoint-num-gpus", str(spec["entrypointNumGpus"])]
    if spec.get("entrypointResources"):
        submit += ["--entrypoint-resources", spec["entrypointResources"]]
    submit_cmd = " ".join(shlex.quote(part) if "$" not in part else part for part in submit)
    submit_cmd += f" --submission-id $RAY_JOB_SUBMISSION_ID -- {spec.get('entrypoint', '')}"
    status_cmd = f"ray job status --address {address} $RAY_JOB_SUBMISSION_ID >/dev/null 2>&1"
    logs_cmd = f"ray job logs --address {address} --follow $RAY_JOB_SUBMISSION_ID"
    return f"if ! {status_cmd}; then {submit_cmd}; fi; {logs_cmd}"


def _set_env(container: dict[str, Any], name: str, value: str) -> None:
    env = [e for e in container.get("env") or [] if e.get("name") != name]
    env.append({"name": name, "value": value})
    container["env"] = env


def _owner(rayjob: Mapping[str, Any]) -> dict[str, Any]:
    return labels.owner_reference(dict(rayjob))


def submitter_job(
    rayjob: Mapping[str, Any], job_id: str, dashboard_address: str, default_image: str
) -> dict[str, Any]:
    """The K8sJobMode batch Job. `dashboard_address` is host:port, as in status.dashboardURL."""
    meta = rayjob["metadata"]
    spec = rayjob.get("spec") or {}
    template = copy.deepcopy(spec.get("submitterPodTemplate") or {})
    pod_spec = template.setdefault("spec", {})
    containers = pod_spec.setdefault("containers", [])
    if not containers:
        containers.append({"name": SUBMITTER_CONTAINER})
    container = containers[0]
    container.setdefault("image", default_image)
    if not container.get("command"):
        container["command"] = ["/bin/bash", "-lc", "--"]
        container["args"] = [submit_script(rayjob)]
    container.setdefault(
        "resources", {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}
    )
    _set_env(container, "RAY_DASHBOARD_ADDRESS", dashboard_address)
    _set_env(container, "RAY_JOB_SUBMISSION_ID", job_id)
    pod_spec.setdefault("restartPolicy", "Never")
    template_meta = template.setdefault("metadata", {})
    template_meta["labels"] = {**(template_meta.get("labels") or {}), **submitter_labels(meta["name"])}
    backoff = (spec.get("submitterConfig") or {}).get("backoffLimit")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": submitter_labels(meta["name"]),
            "ownerReferences": [_owner(rayjob)],
        },
        "spec": {
            "backoffLimit": DEFAULT_SUBMITTER_BACKOFF_LIMIT if backoff is None else int(backoff),
            "template": template,
        },
    }


def submitter_labels(rayjob_name: str) -> dict[str, str]:
    return {
        labels.ORIGINATED_FROM_CR_NAME: labels.label_value(rayjob_name),
        labels.ORIGINATED_FROM_CRD: "RayJob",
        labels.RAY_JOB_SUBMITTER: "true",
        labels.CREATED_BY: labels.CREATED_BY_VALUE,
    }


def sidecar_container(
    rayjob: Mapping[str, Any], job_id: str, image: str, dashboard_port: int
) -> dict[str, Any]:
    """SidecarMode: the submitter runs in the head pod and waits for the local dashboard first."""
    wait = (
        "until ray job list --address http://$RAY_DASHBOARD_ADDRESS >/dev/null 2>&1; "
        "do echo waiting for the Ray dashboard; sleep 2; done"
    )
    return {
        "name": SUBMITTER_CONTAINER,
        "image": image,
        "command": ["/bin/bash", "-lc", "--"],
        "args": [f"{wait}; {submit_script(rayjob)}"],
        "env": [
            {"name": "RAY_DASHBOARD_ADDRESS", "value": f"127.0.0.1:{dashboard_port}"},
            {"name": "RAY_JOB_SUBMISSION_ID", "value": job_id},
        ],
        "resources": {
            "limits": {"cpu": "500m", "memory": "512Mi"},
            "requests": {"cpu": "100m", "memory": "128Mi"},
        },
    }


def job_finished(job: Mapping[str, Any]) -> tuple[bool, bool]:
    """(finished, failed) from a batch Job's conditions."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") in ("Complete", "SuccessCriteriaMet"):
            return True, False
        if condition.get("type") in ("Failed", "FailureTarget"):
            return True, True
    return False, False
