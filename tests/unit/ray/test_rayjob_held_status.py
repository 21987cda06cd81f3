"""A RayJob the queue holds says so in a status the CRD accepts: `reason` is KubeRay's enum of
failure reasons, so what the queue waits for goes in the message. (Before the fix the reason was
"WaitingForQuota", which the API server refuses with a 422: the held RayJob's status was never
written, and its reconcile failed over and over, as the fault tests' operator logs showed.)"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import yaml

from rayquota.operator.core.gate import GateVerdict
from rayquota.operator.queue.gating.gate import WAITING_FOR_PLACEMENT, WAITING_FOR_QUOTA
from rayquota.operator.ray.rayjob.reconciler import RayJobReconciler

CRD = Path(__file__).resolve().parents[3] / "crds" / "ray.io_rayjobs.yaml"


def status_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    return dict(version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"])


@pytest.mark.parametrize("waits_for", [WAITING_FOR_QUOTA, WAITING_FOR_PLACEMENT])
def test_a_held_rayjob_s_status_is_one_the_crd_accepts(waits_for: str) -> None:
    verdict = GateVerdict(False, False, waits_for, "not admitted: the queue has 0 of 4 GPUs free")
    reconciler = SimpleNamespace(
        manager=SimpleNamespace(gate=SimpleNamespace(may_run=lambda kind, obj: verdict))
    )
    status: dict[str, Any] = {"reason": "AppFailed"}  # a reason left from an earlier run

    held = RayJobReconciler._held_by_queue(cast(RayJobReconciler, reconciler), {"spec": {}}, status)

    assert held
    schema = status_schema()
    assert status["jobDeploymentStatus"] in schema["jobDeploymentStatus"].get(
        "enum", [status["jobDeploymentStatus"]]
    )
    assert status["reason"] is None or status["reason"] in schema["reason"]["enum"]
    assert status["message"].startswith(f"{waits_for}: ") and "0 of 4 GPUs" in status["message"]
