"""A pending Workload's live numbers are not rewritten on every cycle; real transitions are."""

from __future__ import annotations

from rayquota.operator.queue.workloads.pending_writes import PendingWrites, cause_of


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


def test_held_back_numbers_say_when_to_look_again() -> None:
    now = [100.0]
    writes = PendingWrites(min_interval_s=30, clock=lambda: now[0])
    assert writes.should_write("ns/w", None, _pending("has 3 of 20 free"), evaluated=True)
    assert writes.retry_after("ns/w") is None
    now[0] += 10
    fewer = _pending("has 2 of 20 free")
    assert not writes.should_write("ns/w", _pending("has 3 of 20 free"), fewer, evaluated=True)
    retry = writes.retry_after("ns/w")
    assert retry is not None and 20 <= retry < 21
    now[0] += retry
    assert writes.should_write("ns/w", _pending("has 3 of 20 free"), fewer, evaluated=True)
    assert writes.retry_after("ns/w") is None


SHORTAGE = "needs 8 nvidia.com/gpu in flavor a100; ClusterQueue gpu-8 has 0 of 8 free"


def test_a_new_cause_is_written_at_once() -> None:
    now = [100.0]
    writes = PendingWrites(min_interval_s=30, clock=lambda: now[0])
    assert writes.should_write("ns/w", None, _pending(SHORTAGE), evaluated=True)
    now[0] += 1
    for cause in (
        "ClusterQueue gpu-8 is stopped (Hold)",
        "ClusterQueue gpu-8 does not exist",
        "needs 8 nvidia.com/gpu in flavor h100; ClusterQueue gpu-8 has 0 of 8 free",
        "waiting behind default/rayjob-first-61347 at the head of StrictFIFO ClusterQueue gpu-8",
        "waiting behind default/rayjob-third-0a1b2 at the head of StrictFIFO ClusterQueue gpu-8",
    ):
        assert writes.should_write("ns/w", _pending(SHORTAGE), _pending(cause), evaluated=True), cause
        assert writes.retry_after("ns/w") is None
    # The same cause with new numbers waits for the interval.
    more = SHORTAGE.replace("needs 8", "needs 16").replace("0 of 8", "4 of 8")
    assert not writes.should_write("ns/w", _pending(SHORTAGE), _pending(more), evaluated=True)


def test_cause_of_blanks_quantities_not_names() -> None:
    assert cause_of("needs 36Gi memory; has 1.5 of 8 free") == cause_of("needs 4Gi memory; has 0 of 64 free")
    assert cause_of("waiting behind ns/job-61347") != cause_of("waiting behind ns/job-61348")


def test_first_verdicts_share_a_budget_and_over_budget_ones_get_the_next_free_slot() -> None:
    now = [100.0]
    writes = PendingWrites(rate_per_s=10, burst=3, clock=lambda: now[0])
    # A burst of three at once, then one slot every 0.1 s.
    assert [writes.should_write(f"ns/w{i}", None, _pending("full"), evaluated=True) for i in range(3)] == [
        True,
        True,
        True,
    ]
    assert not writes.should_write("ns/w3", None, _pending("full"), evaluated=True)
    assert not writes.should_write("ns/w4", None, _pending("full"), evaluated=True)
    assert abs((writes.retry_after("ns/w3") or 0) - (0.1 + 0.1)) < 1e-9  # slot + margin
    assert abs((writes.retry_after("ns/w4") or 0) - (0.2 + 0.1)) < 1e-9
    # Asked again before its slot, a Workload keeps the slot it was given (no new one).
    now[0] += 0.05
    assert not writes.should_write("ns/w3", None, _pending("full"), evaluated=True)
    assert abs((writes.retry_after("ns/w3") or 0) - (0.05 + 0.1)) < 1e-9
    now[0] += 0.05
    assert writes.should_write("ns/w3", None, _pending("full"), evaluated=True)
    assert writes.retry_after("ns/w3") is None
    # Admitted before its slot came: written at once, and its slot is not kept.
    assert writes.should_write("ns/w4", None, ADMITTED, evaluated=True)
    assert writes.retry_after("ns/w4") is None


def test_transitions_are_never_held_back_by_the_budget() -> None:
    now = [0.0]
    writes = PendingWrites(rate_per_s=1, burst=1, clock=lambda: now[0])
    assert writes.should_write("ns/a", None, _pending("full"), evaluated=True)
    assert not writes.should_write("ns/b", None, _pending("full"), evaluated=True)
    # Evicted back into the queue, and admitted: both at once whatever the budget says.
    assert writes.should_write("ns/c", ADMITTED, _pending("requeued"), evaluated=False)
    assert writes.should_write("ns/d", _pending("full"), ADMITTED, evaluated=True)


def test_new_words_after_the_interval_also_take_a_slot() -> None:
    now = [0.0]
    writes = PendingWrites(min_interval_s=30, rate_per_s=1, burst=1, clock=lambda: now[0])
    assert writes.should_write("ns/a", None, _pending("3 free"), evaluated=True)
    now[0] += 30.5
    assert writes.should_write("ns/b", None, _pending("2 free"), evaluated=True)  # the one slot
    assert not writes.should_write("ns/a", _pending("3 free"), _pending("4 free"), evaluated=True)
    retry = writes.retry_after("ns/a")
    assert retry is not None and 0.5 < retry <= 1.1


def test_by_default_a_flood_of_first_verdicts_is_told_at_five_a_second_after_a_burst_of_a_hundred() -> None:
    """Kueue's baseline on a loaded machine (640 s): at 20 a second, 8,238 of 15,000 Workloads got
    a sentence before their admission, 1.75 writes per Workload with the queues' status."""
    now = [0.0]
    writes = PendingWrites(clock=lambda: now[0])
    told = [writes.should_write(f"ns/w{i}", None, _pending("full"), evaluated=True) for i in range(1000)]
    assert sum(told) == 100
    now[0] += 60.01
    told = [writes.should_write(f"ns/w{i}", None, _pending("full"), evaluated=True) for i in range(100, 1000)]
    assert sum(told) == 300  # the slots that came in 60 s
