"""Build head and worker pods from a RayCluster's templates, the way KubeRay does.

Everything here is pure: the inputs are the RayCluster body (a camelCase dict as the API
server returns it) and a few settings; the output is a pod manifest.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.operator.ray.builders import auth_token, autoscaler_sidecar, autoscaler_v2, gcs_ft, probes
from rayquota.operator.ray.builders.ray_start import (
    DEFAULT_METRICS_PORT,
    SHELL_COMMAND,
    ULIMIT_COMMAND,
    ray_start_command,
    ray_start_params,
    to_decimal,
)
from rayquota.operator.ray.vocabulary import labels

DEFAULT_GCS_PORT = 6379
DEFAULT_DASHBOARD_PORT = 8265
DEFAULT_CLIENT_PORT = 10001
DEFAULT_SERVE_PORT = 8000

SHARED_MEMORY_VOLUME = "shared-mem"
SHARED_MEMORY_MOUNT_PATH = "/dev/shm"


@dataclass(frozen=True)
class PodContext:
    """What a pod needs to know beyond its own group spec."""

    cluster: Mapping[str, Any]
    operator_version: str
    spec_hash: str
    cluster_domain: str = labels.DEFAULT_CLUSTER_DOMAIN

    @property
    def name(self) -> str:
        return str(self.cluster["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.cluster["metadata"]["namespace"])

    @property
    def spec(self) -> Mapping[str, Any]:
        spec: Mapping[str, Any] = self.cluster.get("spec", {})
        return spec

    @property
    def head_service_fqdn(self) -> str:
        return labels.head_service_fqdn(self.cluster, self.cluster_domain)

    @property
    def head_service_name(self) -> str:
        return labels.cluster_head_service_name(self.cluster)

    @property
    def gcs_port(self) -> int:
        params = self.spec.get("headGroupSpec", {}).get("rayStartParams") or {}
        return int(params.get("port", DEFAULT_GCS_PORT))

    @property
    def autoscaling(self) -> bool:
        return bool(self.spec.get("enableInTreeAutoscaling"))

    @property
    def originating_crd(self) -> str:
        cluster_labels = self.cluster["metadata"].get("labels") or {}
        return str(cluster_labels.get(labels.ORIGINATED_FROM_CRD, "RayCluster"))


# --- pods -----------------------------------------------------------------------------------


def ray_container_index(pod_spec: Mapping[str, Any]) -> int:
    """KubeRay's rule: the container with env RAY=true, else the first one."""
    for i, container in enumerate(pod_spec.get("containers", [])):
        for env in container.get("env") or []:
            if env.get("name", "").upper() == "RAY" and str(env.get("value", "")).lower() == "true":
                return i
    return 0


def _set_env_default(container: dict[str, Any], name: str, value: str | None = None, **source: Any) -> None:
    env = container.setdefault("env", [])
    if any(e.get("name") == name for e in env):
        return
    entry: dict[str, Any] = {"name": name}
    if source:
        entry["valueFrom"] = source
    else:
        entry["value"] = value or ""
    env.append(entry)


def _field_ref(path: str) -> dict[str, Any]:
    return {"fieldRef": {"fieldPath": path}}


def _ensure_port(container: dict[str, Any], name: str, port: int) -> None:
    ports = container.setdefault("ports", [])
    if any(p.get("name") == name or p.get("containerPort") == port for p in ports):
        return
    ports.append({"name": name, "containerPort": port, "protocol": "TCP"})


def add_empty_dir(
    pod_spec: dict[str, Any],
    container: dict[str, Any],
    volume: str,
    mount_path: str,
    size_limit: str | None = None,
) -> None:
    """Mount an emptyDir named `volume` at `mount_path`, unless something is mounted there."""
    mounts = container.setdefault("volumeMounts", [])
    if any(m.get("mountPath") == mount_path for m in mounts):
        return
    volumes = pod_spec.setdefault("volumes", [])
    if not any(v.get("name") == volume for v in volumes):
        empty_dir: dict[str, Any] = {}
        if mount_path == SHARED_MEMORY_MOUNT_PATH:
            empty_dir["medium"] = "Memory"
        if size_limit is not None:
            empty_dir["sizeLimit"] = size_limit
        volumes.append({"name": volume, "emptyDir": empty_dir})
    mounts.append({"name": volume, "mountPath": mount_path})


def _ensure_shared_memory(
    pod_spec: dict[str, Any], container: dict[str, Any], params: Mapping[str, str]
) -> None:
    if "plasma-directory" in params:
        return  # the user put the object store elsewhere
    add_empty_dir(
        pod_spec, container, SHARED_MEMORY_VOLUME, SHARED_MEMORY_MOUNT_PATH, _memory_as_written(container)
    )


def _memory_as_written(container: Mapping[str, Any]) -> str | None:
    """The container's memory limit (else request) as the user wrote it ("5Gi"), for /dev/shm."""
    resources = container.get("resources") or {}
    for section in ("limits", "requests"):
        value = (resources.get(section) or {}).get("memory")
        if value is not None and to_decimal(value) > 0:
            return str(value)
    return None


def _container_command_overridden(container: Mapping[str, Any], ctx: PodContext) -> bool:
    annotations = ctx.cluster["metadata"].get("annotations") or {}
    if str(annotations.get(OVERWRITE_CONTAINER_CMD_ANNOTATION, "")).lower() == "true":
        return True
    text = " ".join([*(container.get("command") or []), *(container.get("args") or [])])
    return "ray start" in text


def _apply_ray_command(container: dict[str, Any], start_cmd: str, ctx: PodContext) -> None:
    if _container_command_overridden(container, ctx):
        return
    user_cmd = " ".join([*(container.get("command") or []), *(container.get("args") or [])]).strip()
    generated = f"{ULIMIT_COMMAND}; {start_cmd}"
    container["command"] = list(SHELL_COMMAND)
    # The user's command runs first: `ray start --block` never returns, so nothing after it would.
    container["args"] = [f"{user_cmd} && {generated}" if user_cmd else generated]


def _common_env(container: dict[str, Any], ctx: PodContext, start_cmd: str) -> None:
    _set_env_default(container, "RAY_CLUSTER_NAME", **_field_ref(f"metadata.labels['{labels.RAY_CLUSTER}']"))
    _set_env_default(container, "RAY_CLUSTER_NAMESPACE", **_field_ref("metadata.namespace"))
    _set_env_default(container, "RAY_CLOUD_INSTANCE_ID", **_field_ref("metadata.name"))
    _set_env_default(container, "RAY_NODE_TYPE_NAME", **_field_ref(f"metadata.labels['{labels.RAY_GROUP}']"))
    _set_env_default(container, "KUBERAY_GEN_RAY_START_CMD", start_cmd)
    _set_env_default(container, "RAY_PORT", str(ctx.gcs_port))
    _set_env_default(container, "RAY_USAGE_STATS_KUBERAY_IN_USE", "1")
    _set_env_default(container, "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE", "1")
    if ctx.originating_crd == "RayService":
        # KubeRay's values for a serving cluster: fail over quickly when a node or the GCS is lost.
        for name, value in RAYSERVICE_ENV_DEFAULTS.items():
            _set_env_default(container, name, value)


def _set_init_container_env(pod_spec: dict[str, Any], ctx: PodContext) -> None:
    # Every init container learns the head's address (a TLS set-up script needs it, the
    # wait-gcs-ready container waits on it).
    for init in pod_spec.get("initContainers") or []:
        _set_env_default(init, "FQ_RAY_IP", ctx.head_service_fqdn)
        _set_env_default(init, "RAY_IP", ctx.head_service_name)


def _pod_metadata(
    template: Mapping[str, Any],
    group: Mapping[str, Any],
    ctx: PodContext,
    node_type: str,
    group_name: str,
) -> dict[str, Any]:
    meta = copy.deepcopy(template.get("metadata") or {})
    meta.pop("name", None)
    meta.pop("generateName", None)
    # KubeRay's precedence: its labels, then the template's and the group's own `labels` on top,
    # except the ones that say which cluster and group a pod belongs to (and which operator made it,
    # since that is how we find our pods).
    pod_labels = labels.pod_labels(ctx.name, node_type, group_name)
    fixed = {labels.RAY_CLUSTER, labels.RAY_NODE_TYPE, labels.RAY_GROUP, labels.CREATED_BY}
    for key, value in {**(meta.get("labels") or {}), **(group.get("labels") or {})}.items():
        if key not in fixed:
            pod_labels[str(key)] = str(value)
    if (ctx.cluster["metadata"].get("annotations") or {}).get(ENABLE_SERVE_SERVICE_ANNOTATION) == "true":
        pod_labels[SERVE_LABEL] = "true"
    if ctx.originating_crd == "RayService":
        # A RayService's workers are in its serve Service from the start (their readiness probe
        # gates traffic); its head only once the RayService controller sees Serve running there.
        pod_labels[SERVE_LABEL] = "false" if node_type == labels.HEAD_NODE else "true"
    annotations = dict(meta.get("annotations") or {})
    annotations[labels.HASH_ANNOTATION] = ctx.spec_hash
    annotations[labels.OPERATOR_VERSION_ANNOTATION] = ctx.operator_version
    meta.update(
        {
            "namespace": ctx.namespace,
            "labels": pod_labels,
            "annotations": annotations,
            "ownerReferences": [labels.owner_reference(dict(ctx.cluster))],
        }
    )
    return meta


ENABLE_SERVE_SERVICE_ANNOTATION = "ray.io/enable-serve-service"
OVERWRITE_CONTAINER_CMD_ANNOTATION = "ray.io/overwrite-container-cmd"
SERVE_LABEL = "ray.io/serve"
RAYSERVICE_ENV_DEFAULTS = {
    "RAY_timeout_ms_task_wait_for_death_info": "0",
    "RAY_gcs_server_request_timeout_seconds": "5",
    "RAY_SERVE_KV_TIMEOUT_S": "5",
}


def _serve_probe_port(ctx: PodContext, node_type: str, container: Mapping[str, Any]) -> int | None:
    """The Serve port a RayService worker's readiness probe checks; None for everyone else."""
    if ctx.originating_crd != "RayService" or node_type != labels.WORKER_NODE:
        return None
    for port in container.get("ports") or []:
        if port.get("name") == "serve":
            return int(port["containerPort"])
    return DEFAULT_SERVE_PORT


def _finish_ray_container(
    pod_spec: dict[str, Any],
    ctx: PodContext,
    node_type: str,
    group: Mapping[str, Any],
    param_overrides: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Command, env, ports, /dev/shm and probes of the Ray container; returns it.
    `param_overrides` replace rayStartParams the operator sets itself (the Redis credentials)."""
    container: dict[str, Any] = pod_spec["containers"][ray_container_index(pod_spec)]
    params = ray_start_params(
        node_type, group, container, f"{ctx.head_service_fqdn}:{ctx.gcs_port}", ctx.autoscaling
    )
    params.update(param_overrides or {})
    start_cmd = ray_start_command(node_type, params)
    _apply_ray_command(container, start_cmd, ctx)
    _common_env(container, ctx, start_cmd)
    _ensure_port(container, "metrics", DEFAULT_METRICS_PORT)
    _ensure_shared_memory(pod_spec, container, params)
    probes.add_default_probes(
        container, node_type, params, ctx.spec.get("rayVersion"), _serve_probe_port(ctx, node_type, container)
    )
    return container


def _set_name(meta: dict[str, Any], name: str) -> None:
    # The name is chosen here (the operator tracks the pods it creates by name); generateName
    # records the prefix as KubeRay's pods carry it.
    meta["name"] = name
    meta["generateName"] = name[: -labels.RANDOM_SUFFIX_LENGTH]


def _production_features(
    pod_spec: dict[str, Any], meta: dict[str, Any], container: dict[str, Any], ctx: PodContext, node_type: str
) -> None:
    """GCS fault tolerance, autoscaler v2 and token auth (each module says what it adds)."""
    gcs_ft.configure_pod(meta["annotations"], container, ctx.cluster, node_type)
    autoscaler_v2.configure_pod(pod_spec, container, ctx.spec, head=node_type == labels.HEAD_NODE)
    auth_token.configure_pod(pod_spec, container, ctx.cluster)


def build_head_pod(ctx: PodContext) -> dict[str, Any]:
    head = ctx.spec.get("headGroupSpec") or {}
    template = head.get("template") or {}
    pod_spec = copy.deepcopy(template.get("spec") or {})
    meta = _pod_metadata(template, head, ctx, labels.HEAD_NODE, labels.HEAD_GROUP_NAME)
    _set_name(meta, labels.head_pod_name(ctx.name))
    container = _finish_ray_container(
        pod_spec, ctx, labels.HEAD_NODE, head, gcs_ft.head_start_params(ctx.cluster)
    )
    _set_env_default(container, "RAY_ADDRESS", f"127.0.0.1:{ctx.gcs_port}")
    _set_env_default(
        container,
        "RAY_USAGE_STATS_EXTRA_TAGS",
        f"kuberay_version={ctx.operator_version};kuberay_crd={ctx.originating_crd}",
    )
    if ctx.autoscaling:
        options = ctx.spec.get("autoscalerOptions") or {}
        autoscaler = autoscaler_sidecar.build_autoscaler_container(container.get("image"), options)
        if auth_token.enabled(ctx.spec):
            auth_token.set_container_env(autoscaler, ctx.name, ctx.spec)
        pod_spec["containers"].append(autoscaler)
        for shared in (container, autoscaler):
            add_empty_dir(
                pod_spec, shared, autoscaler_sidecar.RAY_LOGS_VOLUME, autoscaler_sidecar.RAY_LOGS_MOUNT_PATH
            )
        # The autoscaler patches the RayCluster: it runs as the account its Role is bound to.
        pod_spec.setdefault("serviceAccountName", ctx.name)
    _production_features(pod_spec, meta, container, ctx, labels.HEAD_NODE)
    _set_init_container_env(pod_spec, ctx)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}


def build_worker_pod(
    ctx: PodContext,
    group: Mapping[str, Any],
    replica: tuple[str, int] | None = None,
    replica_index: int | None = None,
) -> dict[str, Any]:
    """A worker pod. `replica` is (replica name, host index) for multi-host groups; `replica_index`
    the replica's index in its group (see labels.free_replica_indices)."""
    template = group.get("template") or {}
    pod_spec = copy.deepcopy(template.get("spec") or {})
    group_name = str(group["groupName"])
    meta = _pod_metadata(template, group, ctx, labels.WORKER_NODE, group_name)
    _set_name(meta, labels.worker_pod_name(ctx.name, group_name))
    if replica_index is not None:
        meta["labels"][labels.RAY_WORKER_REPLICA_INDEX] = str(replica_index)
    if replica is not None:
        meta["labels"][labels.RAY_WORKER_REPLICA_NAME] = replica[0]
        meta["labels"][labels.RAY_REPLICA_HOST_INDEX] = str(replica[1])
    # The init container copies the Ray container as the user wrote it (TLS settings live in its
    # env and volumes), before the operator adds its own env.
    user_container = copy.deepcopy(pod_spec["containers"][ray_container_index(pod_spec)])
    container = _finish_ray_container(pod_spec, ctx, labels.WORKER_NODE, group)
    _set_env_default(container, "FQ_RAY_IP", ctx.head_service_fqdn)
    _set_env_default(container, "RAY_IP", ctx.head_service_name)
    _set_env_default(container, "RAY_ADDRESS", f"{ctx.head_service_fqdn}:{ctx.gcs_port}")
    init_containers = pod_spec.setdefault("initContainers", [])
    if not any(c.get("name") == labels.WAIT_GCS_INIT_CONTAINER for c in init_containers):
        init_containers.append(build_wait_gcs_init_container(ctx, user_container))
    _production_features(pod_spec, meta, container, ctx, labels.WORKER_NODE)
    _set_init_container_env(pod_spec, ctx)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}


def build_wait_gcs_init_container(ctx: PodContext, ray_container: Mapping[str, Any]) -> dict[str, Any]:
    """Workers wait until the head's GCS answers before `ray start` (KubeRay injects the same).
    Quiet for the first two minutes, then the health check's own errors are shown."""
    address = f"{ctx.head_service_fqdn}:{ctx.gcs_port}"
    script = (
        "SECONDS=0; "
        f"until ray health-check --address {address} > /dev/null 2>&1; do "
        f"if (( SECONDS > 120 )); then ray health-check --address {address}; fi; "
        f'echo "$SECONDS s: waiting for the GCS at {address}"; sleep 5; '
        'done; echo "GCS is ready."'
    )
    container: dict[str, Any] = {
        "name": labels.WAIT_GCS_INIT_CONTAINER,
        "image": ray_container.get("image"),
        "command": list(SHELL_COMMAND),
        "args": [script],
        "env": copy.deepcopy(ray_container.get("env") or []),
        "resources": {
            "limits": {"cpu": "200m", "memory": "256Mi"},
            "requests": {"cpu": "200m", "memory": "256Mi"},
        },
    }
    for key in ("imagePullPolicy", "securityContext", "volumeMounts"):
        if ray_container.get(key):
            container[key] = copy.deepcopy(ray_container[key])
    return container


def build_autoscaler_container(ctx: PodContext, ray_container: Mapping[str, Any]) -> dict[str, Any]:
    """The autoscaler sidecar for this cluster (kept for the queue's pod sets, which size it)."""
    options = ctx.spec.get("autoscalerOptions") or {}
    return autoscaler_sidecar.build_autoscaler_container(ray_container.get("image"), options)
