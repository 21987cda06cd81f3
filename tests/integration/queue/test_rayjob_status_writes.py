"""How often a queued RayJob's status is written: once per thing worth saying.

Each version of the RayJobs is recorded from a watch, so every status write is seen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.queue.conftest import Quota, gpu_rayjob, workload_of
from tests.integration.ray.kubehelpers import Kube, RecordedVersions, condition, wait_for

NOT_YET_EVALUATED = "waiting for the next admission cycle"


def states(versions: list[dict[str, Any]]) -> list[str | None]:
    """jobDeploymentStatus of each version that has a status (None: the field is absent)."""
    return [v["status"].get("jobDeploymentStatus") for v in versions if v.get("status")]


def test_queued_rayjobs_write_their_first_status_with_the_queue_verdict(
    queue_operator: Path, kube: Kube, quota: Quota
) -> None:
    quota.a100_team_queue(8)
    with RecordedVersions(kube, "rayjobs") as recorded:
        kube.apply(gpu_rayjob("first", "team", workers=2, gpus_per_worker=4))
        kube.apply(gpu_rayjob("second", "team", workers=2, gpus_per_worker=4))
        # One of the two fits in 8 GPUs; which one is the engine's business.
        wait_for(
            "one job running on its admission, the other waiting with a reason",
            lambda: (
                sorted(
                    (condition(kube.get("rayjob", n), "QuotaReserved") or {}).get("reason", "")
                    for n in ("first", "second")
                )
                == ["Admitted", "Pending"]
            ),
        )
        running = next(
            n
            for n in ("first", "second")
            if (condition(kube.get("rayjob", n), "QuotaReserved") or {}).get("reason") == "Admitted"
        )
        waiting = "second" if running == "first" else "first"
        wait_for(
            f"{running} initializing, as the watch saw it",
            lambda: "Initializing" in states(recorded.of(running)),
        )
        workload = workload_of(kube, "RayJob", waiting) or {}
        reason = (workload.get("status") or {}).get("pendingReason")
        assert reason and "nvidia.com/gpu" in reason
        wait_for(
            f"{waiting}'s pending reason, as the watch saw it",
            lambda: any(
                (condition(v, "QuotaReserved") or {}).get("message") == reason for v in recorded.of(waiting)
            ),
        )
        versions = {n: recorded.of(n) for n in ("first", "second")}

    for name, seen in versions.items():
        written = [v for v in seen if v.get("status")]
        assert written, f"{name}: no status seen"
        # The first status already carries the queue's verdict: no "not looked at yet" write.
        first_verdict = condition(written[0], "QuotaReserved") or {}
        assert first_verdict.get("message") not in (None, NOT_YET_EVALUATED), (name, written[0]["status"])
        assert all(
            (condition(v, "QuotaReserved") or {}).get("message") != NOT_YET_EVALUATED for v in written
        ), name
    # The waiting job's first status says Suspended and why, in one write.
    waiting_first = next(v for v in versions[waiting] if v.get("status"))
    assert waiting_first["status"]["jobDeploymentStatus"] == "Suspended"
    assert (condition(waiting_first, "QuotaReserved") or {}).get("message") == reason
    # Resumed on admission, the running job goes from Suspended straight to Initializing: New
    # (an empty jobDeploymentStatus) only names the cluster and is never written on its own.
    running_states = states(versions[running])
    assert all(running_states), running_states
    before_initializing = running_states[: running_states.index("Initializing")]
    assert set(before_initializing) <= {"Suspended"}, running_states


def test_a_rayjob_waiting_behind_a_look_alike_still_says_suspended(
    queue_operator: Path, kube: Kube, quota: Quota
) -> None:
    """The engine judges one of a group of look-alike Workloads and parks the rest unjudged; their
    RayJobs get no verdict of their own, and still show KubeRay's Suspended state."""
    quota.a100_team_queue(8)
    kube.apply(gpu_rayjob("big", "team", workers=2, gpus_per_worker=4))
    wait_for(
        "big admitted",
        lambda: (condition(kube.get("rayjob", "big"), "QuotaReserved") or {}).get("reason") == "Admitted",
    )
    waiting = [f"alike-{i}" for i in range(3)]
    for name in waiting:
        kube.apply(gpu_rayjob(name, "team", workers=1, gpus_per_worker=8))
    for name in waiting:
        job = wait_for(
            f"{name} Suspended",
            lambda name=name: (
                (j := kube.get("rayjob", name))
                and (j.get("status") or {}).get("jobDeploymentStatus") == "Suspended"
                and j
            ),
            timeout_s=30,
        )
        verdict = condition(job, "QuotaReserved") or {}
        assert verdict.get("status") == "False" and verdict.get("reason") == "Pending", verdict
        assert job["spec"]["suspend"] is True
