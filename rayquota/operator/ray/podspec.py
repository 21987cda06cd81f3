"""Build head and worker pods from a RayCluster's templates, the way KubeRay does.

Everything here is pure: the inputs are the RayCluster body (a camelCase dict as the API
server returns it) and a few settings; the output is a pod manifest.
"""

from __future__ import annotations

import copy
import json
import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from rayquota.operator.ray import labels

DEFAULT_GCS_PORT = 6379
DEFAULT_DASHBOARD_PORT = 8265
DEFAULT_CLIENT_PORT = 10001
DEFAULT_METRICS_PORT = 8080
DEFAULT_SERVE_PORT = 8000
DEFAULT_DASHBOARD_AGENT_PORT = 52365

SHARED_MEMORY_VOLUME = "shared-mem"
AUTOSCALER_CONTAINER = "autoscaler"
WAIT_GCS_INIT_CONTAINER = "wait-gcs-ready"

# Container resources KubeRay turns into Ray custom resources (everything ending in "gpu" is num-gpus).
ACCELERATOR_RESOURCES = {"google.com/tpu": "TPU", "aws.amazon.com/neuroncore": "neuron_cores"}

HEAD_DEFAULT_PORTS = (
    ("gcs-server", DEFAULT_GCS_PORT),
    ("dashboard", DEFAULT_DASHBOARD_PORT),
    ("client", DEFAULT_CLIENT_PORT),
)


@dataclass(frozen=True)
class PodContext:
    """What a pod needs to know beyond its own group spec."""

    cluster: Mapping[str, Any]
    operator_version: str
    spec_hash: str

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
        return f"{labels.head_service_name(self.name)}.{self.namespace}.svc.cluster.local"

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


# --- ray start ------------------------------------------------------------------------------


def _quantity(value: Any) -> Decimal:
    return Decimal(parse_quantity(str(value)))  # type: ignore[no-untyped-call]


def _limit_or_request(resources: Mapping[str, Any], name: str) -> Decimal | None:
    for section in ("limits", "requests"):
        value = (resources.get(section) or {}).get(name)
        if value is not None and _quantity(value) > 0:
            return _quantity(value)
    return None


def _format_number(value: Decimal) -> str:
    return str(int(value)) if value == value.to_integral_value() else str(value.normalize())


def derived_start_params(resources: Mapping[str, Any]) -> dict[str, str]:
    """num-cpus, memory, num-gpus and resources from a container's limits (else requests)."""
    derived: dict[str, str] = {}
    cpu = _limit_or_request(resources, "cpu")
    if cpu is not None:
        # Ray takes whole CPUs; a fractional limit is rounded up as KubeRay does.
        derived["num-cpus"] = str(math.ceil(cpu))
    memory = _limit_or_request(resources, "memory")
    if memory is not None:
        derived["memory"] = str(int(memory))
    limits = resources.get("limits") or {}
    gpu_keys = sorted(k for k in limits if k.endswith("gpu") and _quantity(limits[k]) > 0)
    if gpu_keys:
        derived["num-gpus"] = _format_number(_quantity(limits[gpu_keys[0]]))
    custom = {
        ray_name: float(_quantity(limits[k]))
        for k, ray_name in sorted(ACCELERATOR_RESOURCES.items())
        if k in limits and _quantity(limits[k]) > 0
    }
    if custom:
        derived["resources"] = json.dumps(custom, sort_keys=True, separators=(",", ":"))
    return derived


def ray_start_params(
    node_type: str,
    group: Mapping[str, Any],
    container: Mapping[str, Any],
    ctx: PodContext,
) -> dict[str, str]:
    """The complete parameter map: defaults, then values derived from resources, then the
    user's rayStartParams, which always win."""
    params: dict[str, str] = {"metrics-export-port": str(DEFAULT_METRICS_PORT), "block": "true"}
    params["dashboard-agent-listen-port"] = str(DEFAULT_DASHBOARD_AGENT_PORT)
    if node_type == labels.HEAD_NODE:
        params["dashboard-host"] = "0.0.0.0"
        if ctx.autoscaling:
            # The sidecar autoscaler replaces Ray's own monitor process.
            params["no-monitor"] = "true"
    else:
        params["address"] = f"{ctx.head_service_fqdn}:{ctx.gcs_port}"
    params.update(derived_start_params(container.get("resources") or {}))
    for key, value in (group.get("rayStartParams") or {}).items():
        params[str(key)] = str(value)
    return params


def ray_start_command(node_type: str, params: Mapping[str, str]) -> str:
    """`ray start` with the parameters sorted, so the same spec always gives the same command."""
    flags: list[str] = []
    for key in sorted(params):
        value = params[key]
        if value.lower() == "true":
            flags.append(f"--{key}")
        elif value.lower() == "false" and key in PRESENCE_FLAGS:
            continue  # a presence-only flag set to false is simply left off
        else:
            flags.append(f"--{key}={_shell_value(key, value)}")
    head = " --head" if node_type == labels.HEAD_NODE else ""
    return f"ulimit -n 65536; ray start{head} {' '.join(flags)}".rstrip()


PRESENCE_FLAGS = frozenset({"block", "no-monitor", "disable-usage-stats"})


def _shell_value(key: str, value: str) -> str:
    # JSON values (resources, labels) need quoting to survive bash.
    if key in ("resources", "labels") or any(c in value for c in " '\"{}$;&|<>"):
        return shlex.quote(value)
    return value


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


def _ensure_shared_memory(pod_spec: dict[str, Any], container: dict[str, Any]) -> None:
    mounts = container.setdefault("volumeMounts", [])
    if any(m.get("mountPath") == "/dev/shm" for m in mounts):
        return
    volumes = pod_spec.setdefault("volumes", [])
    if not any(v.get("name") == SHARED_MEMORY_VOLUME for v in volumes):
        empty_dir: dict[str, Any] = {"medium": "Memory"}
        memory = _limit_or_request(container.get("resources") or {}, "memory")
        if memory is not None:
            empty_dir["sizeLimit"] = str(int(memory))
        volumes.append({"name": SHARED_MEMORY_VOLUME, "emptyDir": empty_dir})
    mounts.append({"name": SHARED_MEMORY_VOLUME, "mountPath": "/dev/shm"})


def _container_command_overridden(container: Mapping[str, Any]) -> bool:
    text = " ".join([*(container.get("command") or []), *(container.get("args") or [])])
    return "ray start" in text


def _apply_ray_command(container: dict[str, Any], start_cmd: str) -> None:
    if _container_command_overridden(container):
        return
    user_cmd = " ".join([*(container.get("command") or []), *(container.get("args") or [])]).strip()
    container["command"] = ["/bin/bash", "-lc", "--"]
    container["args"] = [f"{start_cmd} && {user_cmd}" if user_cmd else start_cmd]


def _common_env(container: dict[str, Any], ctx: PodContext, start_cmd: str) -> None:
    _set_env_default(container, "RAY_CLUSTER_NAME", **_field_ref(f"metadata.labels['{labels.RAY_CLUSTER}']"))
    _set_env_default(container, "RAY_CLOUD_INSTANCE_ID", **_field_ref("metadata.name"))
    _set_env_default(container, "RAY_NODE_TYPE_NAME", **_field_ref(f"metadata.labels['{labels.RAY_GROUP}']"))
    _set_env_default(container, "KUBERAY_GEN_RAY_START_CMD", start_cmd)
    _set_env_default(container, "RAY_PORT", str(ctx.gcs_port))
    _set_env_default(container, "RAY_USAGE_STATS_KUBERAY_IN_USE", "1")
    _set_env_default(
        container,
        "RAY_USAGE_STATS_EXTRA_TAGS",
        f"kuberay_version={ctx.operator_version};kuberay_crd={ctx.originating_crd}",
    )
    _set_env_default(container, "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE", "1")


def _pod_metadata(
    template: Mapping[str, Any], ctx: PodContext, node_type: str, group_name: str
) -> dict[str, Any]:
    meta = copy.deepcopy(template.get("metadata") or {})
    meta.pop("name", None)
    meta.pop("generateName", None)
    pod_labels = dict(meta.get("labels") or {})
    pod_labels.update(labels.pod_labels(ctx.name, node_type, group_name))
    if (ctx.cluster["metadata"].get("annotations") or {}).get(ENABLE_SERVE_SERVICE_ANNOTATION) == "true":
        pod_labels[SERVE_LABEL] = "true"
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
SERVE_LABEL = "ray.io/serve"


def build_head_pod(ctx: PodContext) -> dict[str, Any]:
    head = ctx.spec.get("headGroupSpec") or {}
    template = head.get("template") or {}
    pod_spec = copy.deepcopy(template.get("spec") or {})
    meta = _pod_metadata(template, ctx, labels.HEAD_NODE, labels.HEAD_GROUP_NAME)
    meta["name"] = labels.head_pod_name(ctx.name)
    index = ray_container_index(pod_spec)
    container = pod_spec["containers"][index]
    params = ray_start_params(labels.HEAD_NODE, head, container, ctx)
    start_cmd = ray_start_command(labels.HEAD_NODE, params)
    _apply_ray_command(container, start_cmd)
    _common_env(container, ctx, start_cmd)
    _set_env_default(container, "RAY_IP", "127.0.0.1")
    _set_env_default(container, "RAY_ADDRESS", f"127.0.0.1:{ctx.gcs_port}")
    for name, port in HEAD_DEFAULT_PORTS:
        _ensure_port(container, name, port)
    _ensure_port(container, "metrics", DEFAULT_METRICS_PORT)
    _ensure_shared_memory(pod_spec, container)
    if ctx.autoscaling:
        pod_spec["containers"].append(build_autoscaler_container(ctx, container))
        # The autoscaler patches the RayCluster: it runs as the account its Role is bound to.
        pod_spec.setdefault("serviceAccountName", ctx.name)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}


def build_worker_pod(
    ctx: PodContext, group: Mapping[str, Any], replica: tuple[str, int] | None = None
) -> dict[str, Any]:
    """A worker pod; `replica` is (replica name, host index) for multi-host groups."""
    template = group.get("template") or {}
    pod_spec = copy.deepcopy(template.get("spec") or {})
    group_name = str(group["groupName"])
    meta = _pod_metadata(template, ctx, labels.WORKER_NODE, group_name)
    meta["name"] = labels.worker_pod_name(ctx.name, group_name)
    if replica is not None:
        meta["labels"][labels.RAY_WORKER_REPLICA_NAME] = replica[0]
        meta["labels"][labels.RAY_REPLICA_HOST_INDEX] = str(replica[1])
    index = ray_container_index(pod_spec)
    container = pod_spec["containers"][index]
    params = ray_start_params(labels.WORKER_NODE, group, container, ctx)
    start_cmd = ray_start_command(labels.WORKER_NODE, params)
    _apply_ray_command(container, start_cmd)
    _common_env(container, ctx, start_cmd)
    _set_env_default(container, "FQ_RAY_IP", ctx.head_service_fqdn)
    _set_env_default(container, "RAY_IP", labels.head_service_name(ctx.name))
    _set_env_default(container, "RAY_ADDRESS", f"{ctx.head_service_fqdn}:{ctx.gcs_port}")
    _ensure_port(container, "metrics", DEFAULT_METRICS_PORT)
    _ensure_shared_memory(pod_spec, container)
    pod_spec.setdefault("initContainers", [])
    if not any(c.get("name") == WAIT_GCS_INIT_CONTAINER for c in pod_spec["initContainers"]):
        pod_spec["initContainers"].insert(0, build_wait_gcs_init_container(ctx, container))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}


def build_wait_gcs_init_container(ctx: PodContext, ray_container: Mapping[str, Any]) -> dict[str, Any]:
    """Workers wait until the head's GCS answers before `ray start` (KubeRay injects the same)."""
    script = (
        "SECONDS=0; until ray health-check --address $FQ_RAY_IP:$RAY_PORT > /dev/null 2>&1; "
        'do echo "waiting for GCS at $FQ_RAY_IP:$RAY_PORT ($SECONDS s)"; sleep 5; done'
    )
    container: dict[str, Any] = {
        "name": WAIT_GCS_INIT_CONTAINER,
        "image": ray_container.get("image"),
        "command": ["/bin/bash", "-lc", "--"],
        "args": [script],
        "env": [
            {"name": "FQ_RAY_IP", "value": ctx.head_service_fqdn},
            {"name": "RAY_IP", "value": labels.head_service_name(ctx.name)},
            {"name": "RAY_PORT", "value": str(ctx.gcs_port)},
        ],
        "resources": {
            "limits": {"cpu": "200m", "memory": "256Mi"},
            "requests": {"cpu": "200m", "memory": "256Mi"},
        },
    }
    if ray_container.get("imagePullPolicy"):
        container["imagePullPolicy"] = ray_container["imagePullPolicy"]
    return container


def build_autoscaler_container(ctx: PodContext, ray_container: Mapping[str, Any]) -> dict[str, Any]:
    options = ctx.spec.get("autoscalerOptions") or {}
    container: dict[str, Any] = {
        "name": AUTOSCALER_CONTAINER,
        "image": options.get("image") or ray_container.get("image"),
        "imagePullPolicy": (
            options.get("imagePullPolicy") or ray_container.get("imagePullPolicy") or "IfNotPresent"
        ),
        "command": ["/bin/bash", "-lc", "--"],
        "args": [
            "ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) "
            "--cluster-namespace $(RAY_CLUSTER_NAMESPACE)"
        ],
        "env": [
            {"name": "RAY_CLUSTER_NAME", "valueFrom": _field_ref(f"metadata.labels['{labels.RAY_CLUSTER}']")},
            {"name": "RAY_CLUSTER_NAMESPACE", "valueFrom": _field_ref("metadata.namespace")},
            {"name": "RAY_HEAD_POD_NAME", "valueFrom": _field_ref("metadata.name")},
            {"name": "KUBERAY_CRD_VER", "value": "v1"},
        ],
        "resources": options.get("resources")
        or {
            "limits": {"cpu": "500m", "memory": "512Mi"},
            "requests": {"cpu": "500m", "memory": "512Mi"},
        },
    }
    container["env"].extend(options.get("env") or [])
    for key in ("envFrom", "volumeMounts", "securityContext"):
        if options.get(key):
            container[key] = copy.deepcopy(options[key])
    return container


# --- aggregate demand (status) ----------------------------------------------------------------


def pod_resource_totals(template: Mapping[str, Any]) -> dict[str, Decimal]:
    """Sum of container limits (else requests) of one pod template: cpu, memory, GPUs."""
    totals: dict[str, Decimal] = {"cpu": Decimal(0), "memory": Decimal(0), "gpu": Decimal(0)}
    for container in (template.get("spec") or {}).get("containers", []):
        resources = container.get("resources") or {}
        for name in ("cpu", "memory"):
            value = _limit_or_request(resources, name)
            if value is not None:
                totals[name] += value
        for key, value in (resources.get("limits") or {}).items():
            if key.endswith("gpu"):
                totals["gpu"] += _quantity(value)
    return totals
