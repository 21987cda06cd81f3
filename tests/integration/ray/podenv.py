"""Play the kwok node for one container: its env as the kubelet would give it, read from the pod
the operator built (values, Secrets, the pod's own fields), so a real process here runs with
exactly what the pod would have."""

from __future__ import annotations

import base64
import re
import shlex
from typing import Any

from tests.integration.ray.kubehelpers import Kube

_LABEL_FIELD = re.compile(r"^metadata\.labels\['(.+)'\]$")


def _field(pod: dict[str, Any], path: str) -> str:
    meta = pod["metadata"]
    if path == "metadata.name":
        return str(meta["name"])
    if path == "metadata.namespace":
        return str(meta["namespace"])
    match = _LABEL_FIELD.match(path)
    if match:
        return str((meta.get("labels") or {}).get(match.group(1), ""))
    if path == "status.podIP":
        return "127.0.0.1"  # the process runs on loopback
    raise AssertionError(f"no value for fieldRef {path}")


def container_env(kube: Kube, pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    for entry in container.get("env") or []:
        if "value" in entry:
            env[entry["name"]] = str(entry["value"])
            continue
        source = entry.get("valueFrom") or {}
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            secret = kube.get("secret", ref["name"])
            assert secret is not None, f"Secret {ref['name']} (env {entry['name']}) does not exist"
            env[entry["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
        elif "fieldRef" in source:
            env[entry["name"]] = _field(pod, source["fieldRef"]["fieldPath"])
        else:
            raise AssertionError(f"env {entry['name']}: unsupported source {source}")
    return env


def start_flags(start_command: str, names: tuple[str, ...], env: dict[str, str]) -> list[str]:
    """The `--name=value` flags of the generated `ray start` command for `names`, with `$VAR`
    expanded from `env` as bash would."""
    flags = []
    for word in shlex.split(start_command):
        key, _, value = word.removeprefix("--").partition("=")
        if word.startswith("--") and key in names:
            expanded = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: env.get(m.group(1), ""), value)
            flags.append(f"--{key}={expanded}")
    return flags
