"""A scale-down is submitted to the engine only when no pod it would not cover may exist.

The workload reconciler reads an object's demand, awaits the Workload's spec write, then
submits. In that await a sibling cluster's planner may create a pod under the admission still
recorded: the gate matrix's incremental RayService cells saw 3 GPU workers live under an
admission shrunk to 2. Right before the submit (no await between), the guard looks at the
pods in the cache and the planner's creations in flight."""

from __future__ import annotations

from typing import Any

from rayquota.operator.core import ObjectKey
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.adapters.rayjob import rayjob_demand
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.demand.scale_down import shrinking_pod_sets, why_not_shrink
from rayquota.operator.queue.objects import Queued
from rayquota.operator.queue.workloads.workload_reconciler import WorkloadReconciler
from rayquota.queueing import PodSet, PodSetAssignment, Workload
from tests.unit.queue import bodies

KEY = ObjectKey("team-a", "wl")


class Pods:
    def __init__(self, by_part: dict[str, list[dict[str, Any]]]) -> None:
        self.by_part = by_part

    def pods_by_part(self, _queued: Queued, _children: list[Any], _known: Any = ()) -> dict[str, list[Any]]:
        return self.by_part


def reconciler(pods: list[dict[str, Any]], in_flight: set[str] = frozenset()) -> WorkloadReconciler:  # type: ignore[assignment]
    made = WorkloadReconciler.__new__(WorkloadReconciler)
    made.pods_in_flight = lambda _namespace, cluster: cluster in in_flight
    made.objects = Pods({"job-cluster": pods})  # type: ignore[assignment]
    made._parts = {KEY: ["job-cluster"]}
    return made


def admitted(workers: int) -> AdmittedSlice:
    counts = {"head": 1, "gpu": workers, "submitter": 1}
    return AdmittedSlice("cq", tuple(PodSetAssignment(n, c, {}, {}) for n, c in counts.items()), {})


def asking(workers: int) -> Workload:
    counts = {"head": 1, "gpu": workers, "submitter": 1}
    return Workload("team-a", "wl", "lq", tuple(PodSet(n, c, {}) for n, c in counts.items()))


def judge(made: WorkloadReconciler, before: AdmittedSlice | None, submitted: Workload) -> str | None:
    job = bodies.rayjob()
    queued = Queued("RayJob", job, ADAPTERS["RayJob"], KEY)
    return made._unsafe_shrink(queued, [], KEY, rayjob_demand(job, "job-cluster"), before, submitted)


def workers(n: int) -> list[dict[str, Any]]:
    made = []
    for i in range(n):
        pod = bodies.pod("job-cluster", "worker", "gpu")
        pod["metadata"]["name"] += f"-{i}"
        made.append(pod)
    return [bodies.pod("job-cluster", "head"), *made]


def test_a_scale_down_below_the_live_pods_waits() -> None:
    # Demand read as 1 worker; meanwhile the planner's second worker reached the cache.
    reason = judge(reconciler(workers(2)), admitted(2), asking(1))
    assert reason is not None and "gpu" in reason


def test_a_scale_down_waits_while_the_planner_has_pods_in_flight() -> None:
    reason = judge(reconciler(workers(1), in_flight={"job-cluster"}), admitted(2), asking(1))
    assert reason is not None and "in the cache" in reason


def test_a_scale_down_the_live_pods_fit_goes_on() -> None:
    assert judge(reconciler(workers(1)), admitted(2), asking(1)) is None


def test_growth_and_first_admissions_are_not_held() -> None:
    # Only a smaller admission is guarded: the rest is the engine's to decide.
    assert judge(reconciler(workers(2), in_flight={"job-cluster"}), admitted(1), asking(2)) is None
    assert judge(reconciler(workers(2), in_flight={"job-cluster"}), None, asking(1)) is None


def test_the_rule_names_the_pod_sets_over_the_smaller_admission() -> None:
    admitted, asked = {"head": 1, "gpu": 3, "cpu": 2}, {"head": 1, "gpu": 1, "cpu": 1}
    assert shrinking_pod_sets(admitted, asked) == {"gpu", "cpu"}
    reason = why_not_shrink(admitted, asked, {"head": 1, "gpu": 2, "cpu": 1}, pods_in_flight=False)
    assert reason == "pod sets gpu have more live pods than the smaller admission"
    # A pod set dropped from the ask counts as asking for none.
    assert why_not_shrink({"gpu": 1}, {}, {"gpu": 1}, pods_in_flight=False) is not None
    # Pods in flight hold only a shrink: a same-sized ask is not held.
    assert why_not_shrink(admitted, admitted, {"gpu": 9}, pods_in_flight=True) is None
