"""Admission checks on the local control plane, driven by the built-in ``rayquota.io/manual``
controller (the annotation ``admission.rayquota.io/<check>`` on the Workload): a reservation
waits gated until its check is Ready; Retry gives the quota back and requeues with backoff;
Rejected deactivates. The gate sampler watches throughout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.gate_invariants import State
from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import Quota, cluster_pods, gpu_rayjob, workload_of
from tests.integration.ray.kubehelpers import Kube, condition, wait_for

MANUAL = "rayquota.io/manual"
STATE_ANNOTATION = "admission.rayquota.io/"


def _check_states(workload: dict[str, Any] | None) -> dict[str, str]:
    return {
        e["name"]: e["state"] for e in ((workload or {}).get("status") or {}).get("admissionChecks") or []
    }


def _reserved(kube: Kube, job: str, check: str) -> dict[str, Any]:
    """The job's Workload once it reserved quota with its check Pending (and is not admitted)."""

    def probe() -> dict[str, Any] | None:
        wl = workload_of(kube, "RayJob", job)
        reserved = (condition(wl, "QuotaReserved") or {}).get("status") == "True"
        return wl if reserved and _check_states(wl) == {check: "Pending"} else None

    wl = wait_for(f"{job}'s Workload reserving quota, its check Pending", probe)
    admitted = condition(wl, "Admitted") or {}
    assert admitted.get("status") == "False" and admitted.get("reason") == "UnsatisfiedAdmissionChecks"
    assert check in admitted["message"]
    return wl


def _decide(kube: Kube, workload: dict[str, Any], check: str, state: str) -> None:
    kube.kubectl(
        "annotate",
        "workloads.rayquota.io",
        workload["metadata"]["name"],
        f"{STATE_ANNOTATION}{check}={state}",
    )


def _pods_while_checks_pending(states: list[State]) -> list[str]:
    """Pods that existed while their job's Workload had a check not Ready (or no admission)."""
    found = []
    for state in states:
        for (kind, name), obj in state.items():
            if kind != "Pod":
                continue
            cluster = state.get(("RayCluster", obj["metadata"].get("labels", {}).get("ray.io/cluster", "")))
            job = ((cluster or {}).get("metadata", {}).get("labels") or {}).get(
                "ray.io/originated-from-cr-name"
            )
            for (wkind, _), wl in state.items():
                if wkind == "Workload" and wl["metadata"]["labels"].get("rayquota.io/owner-name") == job:
                    checks = _check_states(dict(wl))
                    if any(s != "Ready" for s in checks.values()) or not wl.get("status", {}).get(
                        "admission"
                    ):
                        found.append(f"pod {name} while {job}'s checks were {checks}")
    return found


def test_manual_check_gates_reservation_then_ready_retry_and_rejected(
    queue_operator: Path, kube: Kube, quota: Quota, gate_sampler: Any
) -> None:
    check = quota.apply("AdmissionCheck", "approval", {"spec": {"controllerName": MANUAL}})
    a100 = quota.flavor("a100", "a100")
    cq = quota.cluster_queue("team", {a100: 8}, admissionChecks=[check])
    quota.local_queue("team", cq)
    sampler: GateSampler = gate_sampler(cq)
    wait_for(
        "the manual check Active",
        lambda: (
            (condition(kube.get("admissionchecks.rayquota.io", check), "Active") or {}).get("status")
            == "True"
        ),
    )

    # 1. Reserved, not admitted: no pod while the check is Pending.
    kube.apply(gpu_rayjob("first", "team", workers=1, gpus_per_worker=4))
    first = _reserved(kube, "first", check)
    sampler.sync()
    assert not kube.list("pods"), "a pod exists while the admission check is Pending"
    # 2. Ready: admitted, the pods start on the flavor's nodes (the sampler checks placement).
    _decide(kube, first, check, "Ready")
    wait_for(
        "first admitted",
        lambda: (condition(workload_of(kube, "RayJob", "first"), "Admitted") or {}).get("status") == "True",
    )
    wait_for(
        "first's 2 pods scheduled",
        lambda: len(p := cluster_pods(kube, "first")) == 2 and all(x["spec"].get("nodeName") for x in p),
        timeout_s=180,
    )

    # 3. Retry: the reservation is given back (pods never ran) and the job waits out a backoff.
    kube.apply(gpu_rayjob("second", "team", workers=1, gpus_per_worker=4))
    second = _reserved(kube, "second", check)
    _decide(kube, second, check, "Retry")

    def requeued() -> dict[str, Any] | None:
        wl = workload_of(kube, "RayJob", "second")
        status = (wl or {}).get("status") or {}
        backoff = condition(wl, "Requeued") or {}
        held = (backoff.get("status"), backoff.get("reason")) == ("False", "AdmissionCheck")
        return wl if not status.get("admission") and held else None

    wl = wait_for("second released and backing off", requeued)
    # Evicted stays true (reason and time) while it waits, though no pod ever held the quota:
    # it queues again by that time, as in Kueue.
    evicted = condition(wl, "Evicted") or {}
    assert (evicted.get("status"), evicted.get("reason")) == ("True", "AdmissionCheck"), evicted
    assert "AdmissionCheck in Retry state" in evicted["message"]
    reserved_at = (condition(second, "QuotaReserved") or {})["lastTransitionTime"]
    assert evicted["lastTransitionTime"] >= reserved_at  # RFC 3339 UTC: ordered as text
    assert (condition(wl, "Requeued") or {})["message"] == evicted["message"]  # Kueue's: the Evicted one
    assert wl["status"]["requeueState"]["count"] == 1 and wl["status"]["requeueState"]["requeueAt"]
    assert _check_states(wl) == {check: "Pending"}  # waits for a new decision at the next reservation
    assert wl["status"]["admissionChecks"][0].get("retryCount") == 1  # decided once, not again once released
    # The decision is consumed: its annotation goes in a write of its own (metadata), which may
    # land after the status write that released the reservation.
    wait_for(
        "second's Retry decision consumed",
        lambda: (
            f"{STATE_ANNOTATION}{check}"
            not in (
                (workload_of(kube, "RayJob", "second") or {}).get("metadata", {}).get("annotations") or {}
            )
        ),
    )
    retry_events = [e for e in kube.events("second") if e["reason"] == "AdmissionCheckRetry"]
    assert retry_events and "AdmissionCheck in Retry state" in retry_events[0]["message"]

    # 4. The released quota is reserved by the next job; Rejected deactivates it.
    kube.apply(gpu_rayjob("third", "team", workers=1, gpus_per_worker=4))
    third = _reserved(kube, "third", check)
    _decide(kube, third, check, "Rejected")

    def deactivated() -> dict[str, Any] | None:
        wl = workload_of(kube, "RayJob", "third")
        reserved = condition(wl, "QuotaReserved") or {}
        inactive = wl is not None and wl["spec"].get("active") is False
        return (
            wl
            if inactive and reserved.get("status") == "False" and not wl["status"].get("admission")
            else None
        )

    wl = wait_for("third deactivated and released", deactivated)
    evicted = condition(wl, "Evicted") or {}
    assert (evicted.get("status"), evicted.get("reason")) == ("True", "DeactivatedDueToAdmissionCheck")
    assert "inactive" in (condition(wl, "QuotaReserved") or {})["message"]
    assert _check_states(wl) == {check: "Rejected"}
    rejected = [e for e in kube.events("third") if e["reason"] == "AdmissionCheckRejected"]
    assert rejected and rejected[0]["type"] == "Warning"
    assert "Deactivated due to AdmissionCheck in Rejected state" in rejected[0]["message"]
    # No pod of the second or third job ever existed, and none of any job before its check was Ready.
    sampler.sync()
    assert not cluster_pods(kube, "second") and not cluster_pods(kube, "third")
    assert _pods_while_checks_pending([state for _, state in sampler.states()]) == []


def test_cluster_queue_naming_a_missing_check_is_inactive(
    queue_operator: Path, kube: Kube, quota: Quota
) -> None:
    a100 = quota.flavor("a100", "a100")
    cq = quota.cluster_queue("unchecked", {a100: 4}, admissionChecks=[quota.name("nowhere")])

    def inactive() -> dict[str, Any] | None:
        active = condition(kube.get("clusterqueues.rayquota.io", cq), "Active") or {}
        return active if active.get("status") == "False" else None

    active = wait_for("the ClusterQueue inactive", inactive)
    assert active["reason"] == "AdmissionCheckNotFound"
    assert f"AdmissionCheck {quota.name('nowhere')} not found" in active["message"]
    quota.apply("AdmissionCheck", "nowhere", {"spec": {"controllerName": MANUAL}})
    wait_for(
        "the ClusterQueue active once the check exists",
        lambda: (
            (condition(kube.get("clusterqueues.rayquota.io", cq), "Active") or {}).get("status") == "True"
        ),
    )
