from __future__ import annotations

from rayquota.operator.queue.demand.slice_growth import Growth, growth, growth_line
from rayquota.queueing import PodSet, PodSetAssignment, Workload

GPU = "nvidia.com/gpu"


def workload(*pod_sets: PodSet) -> Workload:
    return Workload(namespace="ns", name="wl", queue_name="team", pod_sets=pod_sets)


def test_a_raised_count_and_a_new_pod_set_grow_an_unchanged_one_does_not() -> None:
    spec = workload(
        PodSet("head", 1, {"cpu": 1000}),
        PodSet("gpu", 3, {GPU: 1000, "cpu": 1000}),
        PodSet("gpu-new", 1, {GPU: 2000}),
    )
    admitted = (
        PodSetAssignment("head", 1, {"cpu": "a100"}, {"cpu": 1000}),
        PodSetAssignment("gpu", 1, {GPU: "a100", "cpu": "a100"}, {GPU: 1000, "cpu": 1000}),
    )
    assert growth(spec, admitted) == [
        Growth("gpu", 1, 3, {GPU: 2000, "cpu": 2000}),
        Growth("gpu-new", 0, 1, {GPU: 2000}),
    ]


def test_a_shrunk_pod_set_is_not_growth() -> None:
    spec = workload(PodSet("gpu", 1, {GPU: 1000}))
    assert growth(spec, (PodSetAssignment("gpu", 2, {GPU: "a100"}, {GPU: 2000}),)) == []


def test_the_line_uses_the_words_the_workload_carries() -> None:
    item = Growth("gpu", 0, 2, {GPU: 2000, "memory": 2 * 1024**3 * 1000})
    words = {"gpu": "worker group `gpu-workers` of RayJob `ej`"}
    assert growth_line(item, words) == (
        "worker group `gpu-workers` of RayJob `ej`: 2 pods asked, 0 admitted: "
        "2Gi more memory, 2 more nvidia.com/gpu"
    )
    assert growth_line(item, {}).startswith("pod set gpu: 2 pods asked")
