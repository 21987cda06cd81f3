"""A Workload's admission parsed once per version (queue/admission/admission_memo.py)."""

from __future__ import annotations

from typing import Any

from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.admission.admission_memo import AdmissionMemo
from rayquota.operator.queue.status import local_queue_status
from rayquota.queueing import PodSetAssignment


def workload(version: str, workers: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": "wl", "uid": "u1", "resourceVersion": version}}
    if workers is not None:
        pod_sets = [
            PodSetAssignment("gpu", workers, {"nvidia.com/gpu": "h100"}, {"nvidia.com/gpu": 1000 * workers})
        ]
        body["status"] = {"admission": converter.admission_to_api("cq", pod_sets)}
    return body


def test_a_version_is_parsed_once_and_a_new_version_again() -> None:
    memo = AdmissionMemo()
    first = memo.parsed(workload("1", 2))
    assert first is not None and first[0] == "cq" and first[1][0].count == 2
    assert memo.parsed(workload("1", 2)) is first
    second = memo.parsed(workload("2", 1))
    assert second is not None and second[1][0].count == 1
    assert memo.parsed(workload("3", None)) is None


def test_the_memo_stays_bounded() -> None:
    memo = AdmissionMemo(size=2)
    for version in range(5):
        memo.parsed(workload(str(version), 1))
    assert len(memo) == 2


def test_the_local_queue_pass_fills_the_memo_it_is_given() -> None:
    memo = AdmissionMemo()  # empty, hence falsy by its length: it must still be the one used
    admitted = workload("1", 2)
    admitted["metadata"] |= {"namespace": "team-a"}
    admitted["spec"] = {"queueName": "lq"}
    status = local_queue_status(None, "team-a", "lq", [admitted], "2026-11-22T10:00:00Z", memo)
    assert status["admittedWorkloads"] == 1
    assert status["flavorUsage"] == [
        {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "2"}]}
    ]
    assert len(memo) == 1
