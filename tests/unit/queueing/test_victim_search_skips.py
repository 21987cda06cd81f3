"""The victim search runs only where it could find something (issue 35), deciding as before.

Victims are workloads of the queue's cohort tree admitted before the cycle: a tree holding none,
or a queue whose policy preempts nothing, is answered "no candidates" without a search; a search
that finds no candidate stops before working out the tree's reclaim rights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rayquota.queueing import ClusterQueue
from rayquota.queueing.preemption import victim_oracle, victims

from .builders import engine_with_flavors, gpu_group, gpus, queue, reclaiming_cohort, used
from .test_examples import admitted, pending, preempts


def _counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    """Count the calls of ``module.name`` (still calling it)."""
    calls = [0]
    real: Callable[..., Any] = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_no_search_in_a_tree_where_everything_was_admitted_this_cycle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    searches = _counting(monkeypatch, victim_oracle, "find_victims")
    e = reclaiming_cohort("a", "b", "c", cohort="pool")
    for i in range(14):
        e.add_workload(gpus("a", f"low{i}", 1, priority=1, created=i))
    out = e.run_cycle()
    # a takes its 4 and borrows b's and c's 8; the last two fit a's nominal quota if others
    # left, but everything in the tree was admitted in this cycle: nothing to preempt, no search.
    assert len(admitted(out)) == 12 and not preempts(out)
    assert sorted(pending(out)) == ["a/low12", "a/low13"]
    assert searches[0] == 0


def test_a_tree_with_earlier_admissions_is_still_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    searches = _counting(monkeypatch, victim_oracle, "find_victims")
    e = reclaiming_cohort("a", "b", "c", cohort="pool")
    for i in range(6):
        e.add_workload(gpus("a", f"a-low{i}", 1, priority=1, created=i))
        e.add_workload(gpus("c", f"c-low{i}", 1, priority=1, created=i))
    assert len(admitted(e.run_cycle())) == 12
    assert searches[0] == 0
    e.add_workload(gpus("b", "b-high", 2, priority=5, created=20))
    (preempt,) = preempts(e.run_cycle())
    # b's own 4 GPUs are lent to a and c: it reclaims 2 from them, admitted a cycle ago.
    assert searches[0] > 0
    assert len(preempt.victims) == 2 and not any(v.startswith("b/") for v in preempt.victims)


def test_a_queue_that_preempts_nothing_never_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    searches = _counting(monkeypatch, victim_oracle, "find_victims")
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("solo", gpu_group(("h100", 4, None, None))))  # preemption: Never
    for i in range(4):
        e.add_workload(gpus("solo", f"low{i}", 1, priority=1, created=i))
    assert len(admitted(e.run_cycle())) == 4
    e.add_workload(gpus("solo", "high", 1, priority=9, created=10))
    out = e.run_cycle()
    assert list(pending(out)) == ["solo/high"] and not preempts(out)
    assert searches[0] == 0 and used(e, "solo") == 4


def test_a_search_finding_no_queue_over_its_quota_stops_at_the_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    e = reclaiming_cohort("a", "b", "c", cohort="pool")
    for name in ("a", "b", "c"):
        for i in range(4):
            e.add_workload(gpus(name, f"{name}-high{i}", 1, priority=5, created=i))
    assert len(admitted(e.run_cycle())) == 12  # each queue within its own 4: nobody borrows
    searches = _counting(monkeypatch, victim_oracle, "find_victims")
    reclaim_rights = _counting(monkeypatch, victims, "_fits_in_quota")
    e.add_workload(gpus("a", "low", 1, priority=1, created=10))
    out = e.run_cycle()
    # The search runs (the tree holds earlier admissions), finds a's own of higher priority and
    # no queue over its quota: no candidate, so no reclaim rights to work out.
    assert list(pending(out)) == ["a/low"] and not preempts(out)
    assert searches[0] > 0 and reclaim_rights[0] == 0
