"""The Recreate-strategy hash: a digest of everything in a RayCluster spec that, when changed,
must restart the cluster's pods.

Left out, because changing them must never restart running pods:
- worker counts: replicas, minReplicas, maxReplicas, scaleStrategy (workersToDelete) and the
  per-group suspend (numOfHosts stays in: it changes what a multi-host replica is);
- upgradeStrategy itself and spec.suspend;
- the pod templates' tolerations and nodeSelector, which a queue injects when it admits a
  workload onto a flavor (the pods are already placed by then).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

_SPEC_FIELDS_IGNORED = ("upgradeStrategy", "suspend", "managedBy")
_GROUP_FIELDS_IGNORED = ("replicas", "minReplicas", "maxReplicas", "scaleStrategy", "suspend")
_POD_SPEC_FIELDS_IGNORED = ("tolerations", "nodeSelector")


def _strip_template(group: dict[str, Any]) -> None:
    pod_spec = (group.get("template") or {}).get("spec")
    if isinstance(pod_spec, dict):
        for key in _POD_SPEC_FIELDS_IGNORED:
            pod_spec.pop(key, None)


def hashed_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The part of the spec the hash covers (exposed for tests and for explaining a recreate)."""
    stripped = copy.deepcopy(dict(spec))
    for key in _SPEC_FIELDS_IGNORED:
        stripped.pop(key, None)
    head = stripped.get("headGroupSpec")
    if isinstance(head, dict):
        _strip_template(head)
    for group in stripped.get("workerGroupSpecs") or []:
        for key in _GROUP_FIELDS_IGNORED:
            group.pop(key, None)
        _strip_template(group)
    return stripped


def spec_hash(spec: Mapping[str, Any]) -> str:
    canonical = json.dumps(hashed_spec(spec), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]
