"""A pending Workload's live numbers are not rewritten on every cycle; real transitions are."""

from __future__ import annotations

from rayquota.operator.queue.pending_writes import PendingWrites


def _pending(words: str) -> dict[str, object]:
    return {
        "pendingReason": words,
        "conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": words}],
    }


ADMITTED = {
    "admission": {"clusterQueue": "cq"},
    "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "m"}],
}


def test_pending_words_are_written_at_a_bounded_rate() -> None:
    now = [100.0]
    writes = PendingWrites(min_interval_s=30, clock=lambda: now[0])
    assert not writes.should_write("ns/w", None, _pending("next cycle"), evaluated=False)
    assert writes.should_write("ns/w", None, _pending("3 of 20 free"), evaluated=True)
    now[0] += 1
    assert not writes.should_write("ns/w", _pending("3 of 20 free"), _pending("4 of 20 free"), evaluated=True)
    now[0] += 30
    assert writes.should_write("ns/w", _pending("3 of 20 free"), _pending("5 of 20 free"), evaluated=True)


def test_transitions_are_written_at_once() -> None:
    now = [0.0]
    writes = PendingWrites(min_interval_s=30, clock=lambda: now[0])
    assert writes.should_write("ns/w", _pending("a"), _pending("a"), evaluated=True)
    assert writes.should_write("ns/w", _pending("a"), ADMITTED, evaluated=True)
    # Back in the queue after an eviction: the first pending status is written even before a cycle.
    assert writes.should_write("ns/w", ADMITTED, _pending("requeued"), evaluated=False)
    requeued = {
        **_pending("b"),
        "conditions": [*_pending("b")["conditions"], {"type": "Requeued", "status": "True"}],
    }  # type: ignore[list-item]
    assert writes.should_write("ns/w", _pending("b"), requeued, evaluated=True)


def test_held_back_words_say_when_to_look_again() -> None:
    now = [100.0]
    writes = PendingWrites(min_interval_s=30, clock=lambda: now[0])
    assert writes.should_write("ns/w", None, _pending("3 of 20 free"), evaluated=True)
    assert writes.retry_after("ns/w") is None
    now[0] += 10
    stopped = _pending("ClusterQueue cq is stopped (Hold)")
    assert not writes.should_write("ns/w", _pending("3 of 20 free"), stopped, evaluated=True)
    retry = writes.retry_after("ns/w")
    assert retry is not None and 20 <= retry < 21
    now[0] += retry
    assert writes.should_write("ns/w", _pending("3 of 20 free"), stopped, evaluated=True)
    assert writes.retry_after("ns/w") is None
