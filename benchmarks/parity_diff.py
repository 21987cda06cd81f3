"""Normalise what two operators created from the same manifests, and diff it field by field.

Pure functions used by scripts/kuberay_side_by_side.py: objects in, difference lines out. Names
with random suffixes, uids, timestamps and IPs are replaced by placeholders so that only what the
operators decided remains.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Metadata the API server or the controllers of Kubernetes fill in, not the operator.
DROPPED_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "finalizers",
)
DROPPED_POD_SPEC = ("nodeName",)
DROPPED_LABELS = (
    "batch.kubernetes.io/controller-uid",
    "controller-uid",
    "batch.kubernetes.io/job-name",
    "job-name",
)
TIMESTAMP_KEYS = {
    "lastTransitionTime",
    "lastUpdateTime",
    "startTime",
    "endTime",
    "lastProbeTime",
    "completionTime",
    "lastScheduleTime",
}
IP_KEYS = {"podIP", "hostIP", "clusterIP", "serviceIP", "podIPs", "hostIPs", "clusterIPs"}
RANDOM_SUFFIX = re.compile(r"^(?P<stem>.+?)-(?P<suffix>[a-z0-9]{5})$")
ALWAYS_RANDOM = re.compile(r"kube-api-access-[a-z0-9]{5}")


def random_names(objects: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Generated name -> placeholder, for pods, RayJob and RayService clusters, job ids, multi-host
    replicas."""
    names: dict[str, str] = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        if obj.get("kind") == "Pod" and RANDOM_SUFFIX.match(str(meta.get("name", ""))):
            names[str(meta["name"])] = RANDOM_SUFFIX.sub(r"\g<stem>-<rand>", str(meta["name"]))
        replica = (meta.get("labels") or {}).get("ray.io/worker-group-replica-name")
        if replica:
            names[str(replica)] = RANDOM_SUFFIX.sub(r"\g<stem>-<rand>", str(replica))
        status = obj.get("status") or {}
        generated: list[Any] = []
        if obj.get("kind") == "RayJob":
            generated = [status.get("rayClusterName"), status.get("jobId")]
        if obj.get("kind") == "RayService":
            # Each side's active and pending clusters: <service>-<5 random characters>.
            generated = [
                (status.get(side) or {}).get("rayClusterName")
                for side in ("activeServiceStatus", "pendingServiceStatus")
            ]
        for value in generated:
            if value and RANDOM_SUFFIX.match(str(value)):
                names[str(value)] = RANDOM_SUFFIX.sub(r"\g<stem>-<rand>", str(value))
    return names


def _substitute(text: str, names: Mapping[str, str]) -> str:
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, names[name])
    return ALWAYS_RANDOM.sub("kube-api-access-<rand>", text)


def normalize(value: Any, names: Mapping[str, str], key: str = "") -> Any:
    if key in TIMESTAMP_KEYS and value:
        return "<time>"
    if key in IP_KEYS and value and value != "None":
        return "<ip>"
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if k == "stateTransitionTimes" and isinstance(v, Mapping):
                out[k] = {state: "<time>" for state in v}
            else:
                out[_substitute(str(k), names)] = normalize(v, names, str(k))
        return out
    if isinstance(value, list):
        return [normalize(v, names, key) for v in value]
    if isinstance(value, str):
        return _substitute(value, names)
    return value


def strip_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Drop what neither operator decides: server-filled metadata, node placement, pod status."""
    obj = dict(obj)
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in DROPPED_METADATA}
    meta["labels"] = {k: v for k, v in (meta.get("labels") or {}).items() if k not in DROPPED_LABELS}
    meta["ownerReferences"] = [
        {k: v for k, v in ref.items() if k != "uid"} for ref in meta.get("ownerReferences") or []
    ]
    obj["metadata"] = meta
    kind = obj.get("kind")
    if kind == "Pod":
        obj["spec"] = {k: v for k, v in (obj.get("spec") or {}).items() if k not in DROPPED_POD_SPEC}
        obj.pop("status", None)
    if kind == "Job":
        spec = dict(obj.get("spec") or {})
        spec.pop("selector", None)
        template = dict(spec.get("template") or {})
        template_meta = dict(template.get("metadata") or {})
        template_meta["labels"] = {
            k: v for k, v in (template_meta.get("labels") or {}).items() if k not in DROPPED_LABELS
        }
        template["metadata"] = template_meta
        spec["template"] = template
        obj["spec"] = spec
        obj.pop("status", None)
    if kind == "Service":
        obj.pop("status", None)
    return obj


def object_key(obj: Mapping[str, Any]) -> str:
    return f"{obj.get('kind')}/{obj['metadata']['name']}"


def keyed(objects: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Normalised objects by kind/name; objects whose names became equal (the workers of one
    group) are numbered in a stable order."""
    items = list(objects)
    names = random_names(items)
    groups: dict[str, list[dict[str, Any]]] = {}
    for obj in items:
        clean = normalize(strip_object(obj), names)
        groups.setdefault(object_key(clean), []).append(clean)
    result: dict[str, dict[str, Any]] = {}
    for key, members in groups.items():
        members.sort(key=lambda o: repr(sorted((o["metadata"].get("labels") or {}).items())))
        for index, member in enumerate(members):
            result[key if len(members) == 1 else f"{key}#{index}"] = member
    return result


@dataclass(frozen=True)
class Difference:
    key: str  # kind/name
    path: str  # .spec.containers[name=ray-head].args
    kuberay: Any
    ours: Any

    @property
    def where(self) -> str:
        return f"{self.key}{self.path}"


MISSING = "<absent>"


def _list_key(item: Any) -> str | None:
    if isinstance(item, Mapping):
        for field in ("name", "groupName", "type", "mountPath", "containerPort"):
            if field in item:
                return f"{field}={item[field]}"
    return None


def diff(kuberay: Any, ours: Any, key: str, path: str = "") -> list[Difference]:
    if isinstance(kuberay, Mapping) and isinstance(ours, Mapping):
        found: list[Difference] = []
        for k in sorted(set(kuberay) | set(ours)):
            found += diff(kuberay.get(k, MISSING), ours.get(k, MISSING), key, f"{path}.{k}")
        return found
    if isinstance(kuberay, list) and isinstance(ours, list):
        left = {_list_key(i): i for i in kuberay}
        right = {_list_key(i): i for i in ours}
        if None not in left and None not in right and len(left) == len(kuberay) and len(right) == len(ours):
            found = []
            for k in sorted(set(left) | set(right), key=str):
                found += diff(left.get(k, MISSING), right.get(k, MISSING), key, f"{path}[{k}]")
            return found
    if _comparable(kuberay) != _comparable(ours):
        return [Difference(key, path, kuberay, ours)]
    return []


# Spellings that run the same: compared as equal, listed in the report's header.
EQUIVALENT_SPELLINGS = (
    # KubeRay master reads the limit from the environment; unset, it is v1.6.2's 65536.
    (re.compile(r"ulimit -n \$\{RAY_START_ULIMIT_OPEN_FILES:-65536\}"), "ulimit -n 65536"),
)


def _comparable(value: Any) -> Any:
    # Shell scripts differ in spacing only (KubeRay pads every word of a command with spaces).
    if isinstance(value, str):
        for pattern, replacement in EQUIVALENT_SPELLINGS:
            value = pattern.sub(replacement, value)
        return " ".join(value.split())
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # a quantity written 1 or "1" is the same quantity
    return value


@dataclass(frozen=True)
class KnownDifference:
    pattern: str  # regex over Difference.where
    reason: str


def explain(
    differences: Iterable[Difference], known: Iterable[KnownDifference]
) -> list[tuple[Difference, str]]:
    rules = [(re.compile(k.pattern), k.reason) for k in known]
    explained = []
    for difference in differences:
        reason = next((r for rx, r in rules if rx.search(difference.where)), "")
        explained.append((difference, reason))
    return explained


def compare(
    kuberay_objects: Iterable[Mapping[str, Any]], our_objects: Iterable[Mapping[str, Any]]
) -> list[Difference]:
    left, right = keyed(kuberay_objects), keyed(our_objects)
    found: list[Difference] = []
    for key in sorted(set(left) | set(right)):
        if key not in left or key not in right:
            found.append(
                Difference(
                    key, "", "exists" if key in left else MISSING, "exists" if key in right else MISSING
                )
            )
            continue
        found += diff(left[key], right[key], key)
    return found
