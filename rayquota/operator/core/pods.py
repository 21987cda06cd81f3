"""What every controller reads off a pod the same way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# A pod in one of these phases runs nothing any more and never will again.
FINISHED_POD_PHASES = ("Succeeded", "Failed")


def pod_finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in FINISHED_POD_PHASES
