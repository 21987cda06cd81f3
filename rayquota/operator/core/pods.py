"""What every controller reads off a pod the same way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# A pod in one of these phases runs nothing any more and never will again.
FINISHED_POD_PHASES = ("Succeeded", "Failed")


def pod_finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in FINISHED_POD_PHASES


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """Kubernetes readiness: condition Ready=True, and neither finished nor being deleted."""
    if pod["metadata"].get("deletionTimestamp") or pod_finished(pod):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
