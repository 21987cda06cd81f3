"""The eviction journal counts an eviction as Kueue's recorder does and names who took the quota."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.workload_journal import WorkloadJournal


def workload(name: str, uid: str, klass: str, *conditions: tuple[str, str, str, str], cq: str = "") -> Any:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid,
            "labels": {"kueue.x-k8s.io/performance-scheduler-class": klass},
        },
        "status": {
            **({"admission": {"clusterQueue": cq}} if cq else {}),
            "conditions": [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions],
        },
    }


def test_evictions_by_reason_and_by_who_took_the_quota(tmp_path: Path) -> None:
    journal = WorkloadJournal(tmp_path / "kubeconfig", tmp_path / "journal.jsonl")
    uid = "0c5f0b8e-3f3b-4c7e-9d2a-000000000001"
    journal.observe(workload("large-2-0-0", uid, "large"), now=0.0)
    admitted = ("Admitted", "True", "Admitted", "")
    journal.observe(workload("small-0-1-0", "u2", "small", admitted, cq="cq"), now=1.0)
    kueue_message = f"Preempted to accommodate a workload (UID: {uid}, JobUID: UNKNOWN) due to prioritization"
    evicted = workload(
        "small-0-1-0",
        "u2",
        "small",
        admitted,
        ("Evicted", "True", "Preempted", "x"),
        ("Preempted", "True", "InClusterQueue", kueue_message),
        cq="cq",
    )
    journal.observe(evicted, now=3.5)
    journal.observe(evicted, now=4.0)  # the same state again: not a second eviction
    ours = workload(
        "medium-1-0-0",
        "u3",
        "medium",
        ("Evicted", "True", "Preempted", "x"),
        ("Preempted", "True", "InCohortReclamation", "reclaimed (preempted by ns/large-2-0-0)"),
    )
    journal.observe(ours, now=5.0)
    summary = journal.stop()
    assert summary.evictions == 2
    assert summary.by_reason == {"Preempted/InClusterQueue": 1, "Preempted/InCohortReclamation": 1}
    assert summary.by_classes == {"small <- large": 1, "medium <- large": 1}
    assert summary.wasted_s == 2.5
    assert (tmp_path / "journal.jsonl").read_text().count("\n") == 4
