"""benchmarks/kuberay_side_by_side.py rewrites docs/kuberay-compatibility.md (`--out`): the
sections it does not generate (the CRD allow-list, the records of runs by hand against KubeRay
v1.7.0) come back unchanged."""

from __future__ import annotations

import datetime as dt

from benchmarks import kuberay_side_by_side as script

BY_HAND_TITLES = (
    "## Side by side with KubeRay v1.7.0",
    "## networkPolicy beside KubeRay v1.7.0's operator",
)


def test_the_report_keeps_the_crd_allow_list_and_the_runs_by_hand() -> None:
    info = script.RunInfo(dt.datetime(2026, 11, 29, tzinfo=dt.UTC), "abc", "python benchmarks/x.py")
    text = script.report([], [], info)
    doc = script.DOC.read_text(encoding="utf-8")
    start, end = "<!-- by-hand:start -->", "<!-- by-hand:end -->"
    by_hand = doc[doc.index(start) : doc.index(end) + len(end)]
    assert all(title in by_hand for title in BY_HAND_TITLES)
    assert by_hand in text and "<!-- crd-allow-list:end -->" in text
    assert text.index(by_hand) < text.index("## Result of the last run")
