"""The MultiKueue dispatch decision, rule by rule (rayquota/operator/queue/multikueue/dispatch.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rayquota.operator.queue.multikueue.dispatch import Local, Policy, RemoteCopy, Worker, decide
from rayquota.operator.queue.multikueue.settings import Dispatcher
from rayquota.queueing import CheckState

NOW = 10_000.0
POLICY = Policy(worker_lost_timeout_s=60.0, nomination_timeout_s=30.0)
A = "1/2026-01-01T00:00:00Z"  # the current reservation


def local(state: CheckState = CheckState.PENDING, **kw: object) -> Local:
    return Local(state=state, attempt=A, reserved=True, pending_since=NOW - 1, **kw)  # type: ignore[arg-type]


def up(name: str, copy: RemoteCopy | None = None, **kw: object) -> Worker:
    return Worker(name, reachable=True, copy=copy, **kw)  # type: ignore[arg-type]


def admitted(at: str = "2026-01-01T00:00:05Z", **kw: object) -> RemoteCopy:
    return RemoteCopy(attempt=A, admitted_at=at, **kw)  # type: ignore[arg-type]


def test_a_reserved_workload_is_copied_to_every_reachable_worker() -> None:
    plan = decide(local(), [up("w1"), up("w2"), Worker("w3", reachable=False)], POLICY, NOW)
    assert plan.create == ["w1", "w2"]
    assert plan.nominate == ("w1", "w2")
    assert plan.ready is None and plan.retry is None and plan.delete == []


def test_without_a_reservation_every_reachable_copy_goes() -> None:
    workers = [up("w1", RemoteCopy(A)), up("w2", stray_object=True), Worker("w3", reachable=False)]
    for view in (
        Local(CheckState.PENDING, A, reserved=False),
        local(done=True),
        local(CheckState.RETRY),
        local(CheckState.REJECTED),
    ):
        plan = decide(view, workers, POLICY, NOW)
        assert plan.delete == ["w1", "w2"], view
        assert plan.create == [] and plan.sync is None and plan.ready is None


def test_the_first_admission_wins_and_the_other_copies_go() -> None:
    workers = [
        up("w1", admitted("2026-01-01T00:00:09Z")),
        up("w2", admitted("2026-01-01T00:00:05Z")),
        up("w3", RemoteCopy(A)),
    ]
    plan = decide(local(), workers, POLICY, NOW)
    assert (plan.ready, plan.sync) == ("w2", "w2")
    assert plan.delete == ["w1", "w3"]
    assert plan.create == []


def test_a_worker_already_holding_the_object_wins_over_an_earlier_admission() -> None:
    workers = [up("w1", admitted("2026-01-01T00:00:01Z")), up("w2", admitted(has_object=True))]
    assert decide(local(), workers, POLICY, NOW).ready == "w2"


def test_an_evicted_copy_does_not_win() -> None:
    plan = decide(local(), [up("w1", admitted(evicted=True)), up("w2", RemoteCopy(A))], POLICY, NOW)
    assert plan.ready is None


def test_copies_of_an_earlier_reservation_are_removed_and_never_win() -> None:
    stale = RemoteCopy("0/2025-12-31T00:00:00Z", admitted_at="2026-01-01T00:00:00Z", has_object=True)
    plan = decide(local(), [up("w1", stale), up("w2")], POLICY, NOW)
    assert plan.ready is None
    assert plan.delete == ["w1"]
    assert plan.fence == ["w1"]  # it ran there: its pods stop at once
    assert plan.create == ["w2"]  # w1's new copy comes once the old one is gone


def test_ready_keeps_the_object_in_step_in_its_worker_only() -> None:
    view = local(CheckState.READY, cluster_name="w1")
    plan = decide(view, [up("w1", admitted(has_object=True)), up("w2", RemoteCopy(A))], POLICY, NOW)
    assert plan.sync == "w1"
    assert plan.delete == ["w2"]
    assert plan.retry is None and plan.ready is None


def test_ready_whose_copy_is_gone_or_evicted_is_retried() -> None:
    view = local(CheckState.READY, cluster_name="w1")
    assert decide(view, [up("w1")], POLICY, NOW).retry
    assert decide(view, [up("w1", admitted(evicted=True))], POLICY, NOW).retry
    assert decide(view, [up("w1", RemoteCopy(A))], POLICY, NOW).retry  # no longer admitted


def test_a_finished_copy_brings_its_final_status_back() -> None:
    view = local(CheckState.READY, cluster_name="w1")
    plan = decide(view, [up("w1", RemoteCopy(A, finished=True, has_object=True))], POLICY, NOW)
    assert plan.sync == "w1" and plan.retry is None


def test_a_lost_worker_keeps_its_workloads_until_the_timeout_then_they_are_retried() -> None:
    view = local(CheckState.READY, cluster_name="w1")
    lost = Worker("w1", reachable=False, lost_since=NOW - 20)
    plan = decide(view, [lost, up("w2")], POLICY, NOW)
    assert plan.retry is None and plan.delete == [] and plan.create == []
    assert plan.requeue_after_s == 40
    late = Worker("w1", reachable=False, lost_since=NOW - 61)
    plan = decide(view, [late, up("w2")], POLICY, NOW)
    assert plan.retry is not None and "w1" in plan.retry


def test_ready_naming_a_worker_no_longer_configured_is_retried() -> None:
    assert decide(local(CheckState.READY, cluster_name="gone"), [up("w1")], POLICY, NOW).retry


def test_most_free_quota_copies_to_the_roomiest_worker_only() -> None:
    policy = Policy(Dispatcher.MOST_FREE_QUOTA, 60.0, 30.0)
    plan = decide(local(), [up("w1", room=1.0), up("w2", room=3.0)], policy, NOW)
    assert plan.create == ["w2"] and plan.nominate == ("w2",)
    assert plan.requeue_after_s is not None and plan.requeue_after_s <= 30


def test_most_free_quota_copies_everywhere_when_nothing_fits() -> None:
    policy = Policy(Dispatcher.MOST_FREE_QUOTA, 60.0, 30.0)
    plan = decide(local(), [up("w1", room=0.5), up("w2", room=0.0)], policy, NOW)
    assert plan.create == ["w1", "w2"]


def test_most_free_quota_keeps_its_choice_then_widens_after_the_timeout() -> None:
    policy = Policy(Dispatcher.MOST_FREE_QUOTA, 60.0, 30.0)
    waiting = local(nominated=("w2",))
    plan = decide(waiting, [up("w1", room=5.0), up("w2", RemoteCopy(A), room=0.0)], policy, NOW)
    assert plan.create == [] and plan.delete == [] and plan.nominate is None
    widened = Local(CheckState.PENDING, A, reserved=True, nominated=("w2",), pending_since=NOW - 31)
    plan = decide(widened, [up("w1", room=5.0), up("w2", RemoteCopy(A))], policy, NOW)
    assert plan.create == ["w1"] and plan.nominate == ("w1", "w2")


def test_incremental_nominates_workers_in_config_order_in_rounds_and_keeps_earlier_nominees() -> None:
    # Kueue v0.19's Incremental dispatcher: ``step`` workers in the MultiKueueConfig's order (not
    # by name), ``step`` more each round.
    policy = Policy(Dispatcher.INCREMENTAL, 60.0, 30.0, incremental_step=2, incremental_round_s=100.0)
    fleet = [up("w5"), up("w3"), up("w1"), up("w4"), up("w2")]

    def at(waited: float, nominated: tuple[str, ...] = ()) -> Local:
        return Local(CheckState.PENDING, A, reserved=True, nominated=nominated, pending_since=NOW - waited)

    first = decide(at(1.0), fleet, policy, NOW)
    assert first.nominate == ("w5", "w3") and first.create == ["w5", "w3"]
    assert first.requeue_after_s == 99.0  # the next round
    with_copies = [up(w.name, RemoteCopy(A)) if w.name in ("w5", "w3") else w for w in fleet]
    same_round = decide(at(50.0, ("w3", "w5")), with_copies, policy, NOW)  # recorded in any order
    assert same_round.nominate is None and same_round.create == [] and same_round.delete == []
    second = decide(at(150.0, ("w5", "w3")), with_copies, policy, NOW)
    assert second.nominate == ("w5", "w3", "w1", "w4") and second.create == ["w1", "w4"]
    assert second.delete == [] and second.requeue_after_s == 50.0
    last = decide(at(250.0, ("w5", "w3", "w1", "w4")), fleet, policy, NOW)
    assert last.nominate == ("w5", "w3", "w1", "w4", "w2")
    assert last.requeue_after_s is None  # every worker nominated: no further round


def test_incremental_keeps_an_unreachable_nominee_and_removes_copies_outside_the_round() -> None:
    policy = Policy(Dispatcher.INCREMENTAL, 60.0, 30.0, incremental_step=2, incremental_round_s=100.0)
    fleet = [Worker("w1", reachable=False), up("w2"), up("w3", RemoteCopy(A))]
    plan = decide(local(), fleet, policy, NOW)
    assert plan.nominate == ("w1", "w2")  # w1 gets its copy when it is back
    assert plan.create == ["w2"] and plan.delete == ["w3"]
    # The first admission among the nominees wins, as with every dispatcher.
    won = decide(local(nominated=("w1", "w2")), [fleet[0], up("w2", admitted())], policy, NOW)
    assert won.ready == "w2"


copies = st.one_of(
    st.none(),
    st.builds(
        RemoteCopy,
        attempt=st.sampled_from([A, "0/old"]),
        admitted_at=st.one_of(st.none(), st.sampled_from(["2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"])),
        evicted=st.booleans(),
        finished=st.booleans(),
        has_object=st.booleans(),
    ),
)
workers = st.lists(
    st.builds(
        Worker,
        name=st.sampled_from(["w1", "w2", "w3", "w4"]),
        reachable=st.booleans(),
        lost_since=st.one_of(st.none(), st.floats(NOW - 200, NOW)),
        copy=copies,
        stray_object=st.booleans(),
        room=st.floats(0, 4),
    ),
    max_size=4,
    unique_by=lambda w: w.name,
)
locals_ = st.builds(
    Local,
    state=st.sampled_from(list(CheckState)),
    attempt=st.just(A),
    reserved=st.booleans(),
    done=st.booleans(),
    cluster_name=st.one_of(st.none(), st.sampled_from(["w1", "w2", "w3", "w4"])),
    nominated=st.just(()),
    pending_since=st.floats(NOW - 100, NOW),
)


@settings(max_examples=400, deadline=None)
@given(locals_, workers, st.sampled_from(list(Dispatcher)))
def test_never_runs_in_two_workers_and_never_writes_to_an_unreachable_one(
    view: Local, fleet: list[Worker], dispatcher: Dispatcher
) -> None:
    plan = decide(view, fleet, Policy(dispatcher, 60.0, 30.0), NOW)
    reachable = {w.name for w in fleet if w.reachable}
    # Every write goes to a reachable worker.
    assert set(plan.delete) <= reachable and set(plan.create) <= reachable
    assert plan.sync is None or plan.sync in reachable
    # The object lives in one worker at most: the one synced; every other holder is emptied.
    if plan.sync is not None:
        assert plan.sync not in plan.delete
        holders = {w.name for w in fleet if w.reachable and (w.copy is not None or w.stray_object)}
        assert holders - {plan.sync} <= set(plan.delete)
    # Ready names the worker that gets the object; a Retry or a deletion of everything never syncs.
    if plan.ready is not None:
        assert plan.sync == plan.ready
    if plan.retry is not None:
        assert plan.ready is None
    # A copy is never both made and removed in one go.
    assert not set(plan.create) & set(plan.delete)
