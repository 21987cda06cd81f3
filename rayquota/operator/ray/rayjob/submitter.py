"""How a RayJob's entrypoint reaches Ray: the dashboard submission, the K8sJobMode submitter Job
and the SidecarMode submitter container, built like KubeRay's."""

from __future__ import annotations

import copy
import datetime as dt
import json
import shlex
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from rayquota.operator.core.timestamps import parse_rfc3339
from rayquota.operator.ray.builders import auth_token
from rayquota.operator.ray.builders.podspec import ray_container_index
from rayquota.operator.ray.dashboard_api.dashboard import JobSubmission
from rayquota.operator.ray.vocabulary import labels

SUBMITTER_CONTAINER = "ray-job-submitter"
DEFAULT_SUBMITTER_BACKOFF_LIMIT = 2


def _spec_mapping(
    rayjob: Mapping[str, Any], key: str, parse: Callable[[str], Any], what: str
) -> dict[str, Any] | None:
    """``spec.<key>``: text that ``parse`` reads into a mapping (``what`` it must be); ``None``
    when unset."""
    text = rayjob.get("spec", {}).get(key)
    if not text:
        return None
    parsed = parse(text)
    if not isinstance(parsed, dict):
        raise ValueError(f"spec.{key} must be {what}")
    return parsed


def runtime_env(rayjob: Mapping[str, Any]) -> dict[str, Any] | None:
    return _spec_mapping(rayjob, "runtimeEnvYAML", yaml.safe_load, "a YAML mapping")


def entrypoint_resources(rayjob: Mapping[str, Any]) -> dict[str, float] | None:
    parsed = _spec_mapping(rayjob, "entrypointResources", json.loads, "a JSON object")
    return None if parsed is None else {str(k): float(v) for k, v in parsed.items()}


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


GCS_HEALTH_PATH = "api/gcs_healthz"
GCS_HEALTH_TIMEOUT_S = 5
# -e: stop at the first failing command, so a failed submission fails the pod (and the Job retries).
SUBMITTER_SHELL = ["/bin/bash", "-ce", "--"]


def wait_for_gcs(base_url: str) -> str:
    """Shell loop that returns once the dashboard reports a healthy GCS, so `ray job submit` does
    not fail (and burn a Job retry) while the head is still starting."""
    url = f"{base_url}/{GCS_HEALTH_PATH}"
    probe = (
        'python -c "import sys, urllib.request; '
        f"body = urllib.request.urlopen('{url}', timeout={GCS_HEALTH_TIMEOUT_S}).read(); "
        "sys.exit(0 if b'success' in body else 1)\""
    )
    wait = f'echo "waiting for the Ray dashboard at {base_url}"; sleep 2'
    return f"until {probe} >/dev/null 2>&1; do {wait}; done"


def submit_script(rayjob: Mapping[str, Any], base_url: str = "http://$RAY_DASHBOARD_ADDRESS") -> str:
    """Shell script: wait for the GCS, submit once (a restarted submitter finds the job and does
    not resubmit), then follow the logs until the job ends, so the pod's exit tracks the job."""
    spec = rayjob.get("spec") or {}
    submit = ["ray", "job", "submit", "--address", base_url, "--no-wait"]
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
    submit_cmd += f" --submission-id $RAY_JOB_SUBMISSION_ID -- {str(spec.get('entrypoint', '')).strip()}"
    status_cmd = f"ray job status --address {base_url} $RAY_JOB_SUBMISSION_ID >/dev/null 2>&1"
    logs_cmd = f"ray job logs --address {base_url} --follow $RAY_JOB_SUBMISSION_ID"
    return f"{wait_for_gcs(base_url)}; if ! {status_cmd}; then {submit_cmd}; fi; {logs_cmd}"


def _set_env(container: dict[str, Any], name: str, value: str) -> None:
    env = [e for e in container.get("env") or [] if e.get("name") != name]
    env.append({"name": name, "value": value})
    container["env"] = env


def _owner(rayjob: Mapping[str, Any]) -> dict[str, Any]:
    return labels.owner_reference(dict(rayjob))


def head_image(cluster_spec: Mapping[str, Any] | None) -> str | None:
    """The image of the head's Ray container: the submitter uses it, so the `ray` CLI that submits
    matches the cluster's Ray version."""
    pod_spec = (((cluster_spec or {}).get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    containers = pod_spec.get("containers") or []
    if not containers:
        return None
    image = containers[ray_container_index(pod_spec)].get("image")
    return str(image) if image else None


def submitter_job(
    rayjob: Mapping[str, Any],
    job_id: str,
    dashboard_address: str,
    default_image: str,
    cluster: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The K8sJobMode batch Job. `dashboard_address` is host:port, as in status.dashboardURL;
    `cluster` is the RayCluster the job runs on (needed with clusterSelector, where the RayJob
    has no cluster spec of its own)."""
    meta = rayjob["metadata"]
    spec = rayjob.get("spec") or {}
    template = copy.deepcopy(spec.get("submitterPodTemplate") or {})
    pod_spec = template.setdefault("spec", {})
    containers = pod_spec.setdefault("containers", [])
    if not containers:
        containers.append({"name": SUBMITTER_CONTAINER})
    container = containers[0]
    cluster_spec = spec.get("rayClusterSpec") or (cluster or {}).get("spec")
    container.setdefault("image", head_image(cluster_spec) or default_image)
    if not container.get("command"):
        container["command"] = list(SUBMITTER_SHELL)
        container["args"] = [submit_script(rayjob)]
    container.setdefault(
        "resources", {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}
    )
    # Logs appear as the job writes them, not when a buffer fills.
    _set_env(container, "PYTHONUNBUFFERED", "1")
    _set_env(container, "RAY_DASHBOARD_ADDRESS", dashboard_address)
    _set_env(container, "RAY_JOB_SUBMISSION_ID", job_id)
    if cluster is not None:
        _set_auth_env(container, str(cluster["metadata"]["name"]), cluster.get("spec") or {})
        if auth_token.k8s_token_auth(cluster.get("spec") or {}):
            auth_token.add_token_volume(pod_spec)  # the submitter's own account token, mounted
    pod_spec.setdefault("restartPolicy", "Never")
    template_meta = template.setdefault("metadata", {})
    # KubeRay v1.7.0 stamps its own labels on the submitter's pod template over the user's (so a
    # NetworkPolicy can admit the submitter by them); ours marks it for the queue integration.
    template_meta["labels"] = {
        **(template_meta.get("labels") or {}),
        **submitter_labels(meta["name"]),
        labels.RAY_JOB_SUBMITTER: "true",
    }
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
    """KubeRay's labels on the Job and (as v1.7.0 does; v1.6.2 left them off) on its pod template."""
    return {
        labels.ORIGINATED_FROM_CR_NAME: labels.label_value(rayjob_name),
        labels.ORIGINATED_FROM_CRD: "RayJob",
        labels.CREATED_BY: labels.CREATED_BY_VALUE,
    }


def _set_auth_env(container: dict[str, Any], cluster_name: str, cluster_spec: Mapping[str, Any]) -> None:
    """The `ray job` CLI sends the cluster's token when it finds it in the env."""
    if auth_token.enabled(cluster_spec):
        auth_token.set_container_env(container, cluster_name, cluster_spec)


def sidecar_container(
    rayjob: Mapping[str, Any],
    job_id: str,
    image: str,
    dashboard_port: int,
    cluster: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """SidecarMode: the submitter runs in the head pod and waits for the local dashboard first.
    `cluster` (name and spec) gives it the cluster's auth token."""
    container = {
        "name": SUBMITTER_CONTAINER,
        "image": image,
        "command": list(SUBMITTER_SHELL),
        "args": [submit_script(rayjob, f"http://127.0.0.1:{dashboard_port}")],
        "env": [
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            {"name": "RAY_DASHBOARD_ADDRESS", "value": f"127.0.0.1:{dashboard_port}"},
            {"name": "RAY_JOB_SUBMISSION_ID", "value": job_id},
        ],
        "resources": {
            "limits": {"cpu": "1", "memory": "1Gi"},
            "requests": {"cpu": "500m", "memory": "200Mi"},
        },
    }
    if cluster is not None:
        _set_auth_env(container, str(cluster["metadata"]["name"]), cluster.get("spec") or {})
    return container


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


def job_finished_at(job: Mapping[str, Any]) -> dt.datetime | None:
    """When a batch Job reached Complete or Failed (its condition's transition time), or None."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in FINISHED_CONDITIONS:
            stamp = condition.get("lastTransitionTime") or (job.get("status") or {}).get("completionTime")
            if stamp:
                return parse_rfc3339(stamp)
    return None


FINISHED_CONDITIONS = ("Complete", "SuccessCriteriaMet", "Failed", "FailureTarget")
