"""A Workload's admission parsed once per version (queue/admission_memo.py)."""

from __future__ import annotations

from typing import Any

from rayquota.operator.queue import converter
from rayquota.operator.queue.admission_memo import AdmissionMemo
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
