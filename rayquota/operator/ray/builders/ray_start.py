"""The `ray start` command of a Ray container, derived as KubeRay derives it (pure)."""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from rayquota.operator.ray.vocabulary import labels

DEFAULT_METRICS_PORT = 8080
DEFAULT_DASHBOARD_AGENT_PORT = 52365

# Container resources KubeRay turns into Ray custom resources (everything ending in "gpu" is num-gpus).
ACCELERATOR_RESOURCES = {"google.com/tpu": "TPU", "aws.amazon.com/neuroncore": "neuron_cores"}


def to_decimal(value: Any) -> Decimal:
    return Decimal(parse_quantity(str(value)))  # type: ignore[no-untyped-call]


def _limit_or_request(resources: Mapping[str, Any], name: str) -> Decimal | None:
    for section in ("limits", "requests"):
        value = (resources.get(section) or {}).get(name)
        if value is not None and to_decimal(value) > 0:
            return to_decimal(value)
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
    gpu_keys = sorted(k for k in limits if k.endswith("gpu") and to_decimal(limits[k]) > 0)
    if gpu_keys:
        derived["num-gpus"] = _format_number(to_decimal(limits[gpu_keys[0]]))
    custom = {
        ray_name: float(to_decimal(limits[k]))
        for k, ray_name in sorted(ACCELERATOR_RESOURCES.items())
        if k in limits and to_decimal(limits[k]) > 0
    }
    if custom:
        derived["resources"] = json.dumps(custom, sort_keys=True, separators=(",", ":"))
    return derived


def ray_start_params(
    node_type: str,
    group: Mapping[str, Any],
    container: Mapping[str, Any],
    head_address: str,
    autoscaling: bool,
) -> dict[str, str]:
    """The complete parameter map: defaults, then values derived from resources, then the
    user's rayStartParams, then the group's own `resources` and `labels`, which always win.
    `head_address` is host:port of the GCS that workers join."""
    params: dict[str, str] = {"metrics-export-port": str(DEFAULT_METRICS_PORT), "block": "true"}
    params["dashboard-agent-listen-port"] = str(DEFAULT_DASHBOARD_AGENT_PORT)
    if node_type == labels.HEAD_NODE:
        params["dashboard-host"] = "0.0.0.0"
        if autoscaling:
            # The sidecar autoscaler replaces Ray's own monitor process.
            params["no-monitor"] = "true"
    else:
        params["address"] = head_address
    params.update(derived_start_params(container.get("resources") or {}))
    for key, value in (group.get("rayStartParams") or {}).items():
        params[str(key)] = str(value)
    params.update(group_resource_params(group.get("resources") or {}))
    if group.get("labels"):
        params["labels"] = ",".join(f"{k}={v}" for k, v in sorted(group["labels"].items()))
    return params


def group_resource_params(resources: Mapping[str, Any]) -> dict[str, str]:
    """A group's top-level `resources` (Ray's view of the node, not the container's): cpu, memory
    and GPUs become their flags, anything else a custom resource. They win over rayStartParams."""
    params: dict[str, str] = {}
    custom: dict[str, float] = {}
    for name, value in sorted(resources.items()):
        try:
            amount = to_decimal(value)
        except ValueError:
            continue  # KubeRay skips a value it cannot parse, and so do we
        lowered = str(name).lower()
        if lowered == "cpu":
            params["num-cpus"] = str(math.ceil(amount))
        elif lowered == "memory":
            params["memory"] = str(math.ceil(amount))
        elif lowered.endswith("gpu"):
            params["num-gpus"] = str(math.ceil(amount))
        else:
            custom[str(name)] = float(amount)
    if custom:
        params["resources"] = json.dumps(custom, sort_keys=True, separators=(",", ":"))
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
    return f"ray start{head} {' '.join(flags)}".rstrip()


# Raise the open-file limit of `ray start` and its children; RAY_START_ULIMIT_OPEN_FILES in the
# container's env changes it (KubeRay's variable).
ULIMIT_COMMAND = "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}"
# A plain (non-login) shell, as KubeRay runs: a login shell's profile can change PATH or the env.
SHELL_COMMAND = ["/bin/bash", "-c", "--"]


PRESENCE_FLAGS = frozenset({"block", "no-monitor", "disable-usage-stats"})


# A value that is only a reference to the container's env ("$REDIS_PASSWORD"), left for bash to
# expand as KubeRay leaves it: how Redis credentials reach `ray start` without being in the spec.
_ENV_REFERENCE = re.compile(r"^\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)$")


def _shell_value(key: str, value: str) -> str:
    if _ENV_REFERENCE.match(value):
        return value
    # JSON values (resources, labels) need quoting to survive bash.
    if key in ("resources", "labels") or any(c in value for c in " '\"{}$;&|<>"):
        return shlex.quote(value)
    return value
