"""The helpers every controller shares: timestamps, the bounded memo, finished pods."""

from __future__ import annotations

import datetime as dt

from rayquota.operator.core.memo import BoundedMemo
from rayquota.operator.core.pods import pod_finished
from rayquota.operator.core.timestamps import format_rfc3339, parse_rfc3339


def test_api_timestamps_parse_to_aware_utc_and_back() -> None:
    moment = parse_rfc3339("2026-11-22T09:00:05Z")
    assert moment == dt.datetime(2026, 11, 22, 9, 0, 5, tzinfo=dt.UTC)
    assert format_rfc3339(moment) == "2026-11-22T09:00:05Z"
    assert parse_rfc3339("2026-11-22T09:00:05.250000Z") == moment + dt.timedelta(milliseconds=250)
    assert parse_rfc3339("2026-11-22T10:00:05+01:00") == moment
    assert parse_rfc3339("") is None and parse_rfc3339(None) is None


def test_a_naive_datetime_is_taken_as_utc() -> None:
    naive = dt.datetime(2026, 1, 2, 3, 4, 5)
    assert parse_rfc3339(naive) == naive.replace(tzinfo=dt.UTC)


def test_the_memo_computes_once_per_key_and_forgets_the_oldest() -> None:
    memo: BoundedMemo[str, int] = BoundedMemo(size=2)
    calls: list[str] = []

    def compute(key: str) -> int:
        calls.append(key)
        return len(calls)

    assert memo.get("a", lambda: compute("a")) == 1
    assert memo.get("a", lambda: compute("a")) == 1
    memo.get("b", lambda: compute("b"))
    memo.get("c", lambda: compute("c"))
    assert len(memo) == 2
    assert memo.get("a", lambda: compute("a")) == 4  # "a" was the oldest: computed again
    assert calls == ["a", "b", "c", "a"]


def test_only_succeeded_and_failed_pods_are_finished() -> None:
    assert pod_finished({"status": {"phase": "Succeeded"}})
    assert pod_finished({"status": {"phase": "Failed"}})
    assert not pod_finished({"status": {"phase": "Running"}})
    assert not pod_finished({"status": {"phase": "Pending"}})
    assert not pod_finished({})
