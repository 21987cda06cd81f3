"""The autoscaler benchmark's pure readings: watch events to marks, marks to intervals, intervals
to p50/max, /proc/loadavg, and the driver's answer."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import autoscaler_timeline as tl
from benchmarks.autoscaler_rounds import driver_answer, holder_cluster, idle_timeout_patch, scaled_cluster
from benchmarks.autoscaler_watch import RayNodes


def cluster(replicas: int | None, name: str = "rc") -> dict[str, Any]:
    group: dict[str, Any] = {"groupName": tl.GROUP}
    if replicas is not None:
        group["replicas"] = replicas
    return {
        "metadata": {"name": name},
        "spec": {"workerGroupSpecs": [{"groupName": "other", "replicas": 9}, group]},
    }


def workload(owner: str, gpus: int, **status: Any) -> dict[str, Any]:
    usage = [{"resourceUsage": {"cpu": "1"}}, {"resourceUsage": {tl.GPU: str(gpus)}}]
    return {
        "metadata": {
            "name": f"raycluster-{owner}",
            "labels": {tl.OWNER_KIND_LABEL: "raycluster", tl.OWNER_NAME_LABEL: owner},
        },
        "status": {"admission": {"podSetAssignments": usage}, **status},
    }


def test_group_replicas_reads_the_named_group_and_names_a_missing_one() -> None:
    assert tl.group_replicas(cluster(2)) == 2
    assert tl.group_replicas(cluster(None)) == 0
    with pytest.raises(KeyError, match=r"'rc'.*'gpu-workers'"):
        tl.group_replicas({"metadata": {"name": "rc"}, "spec": {"workerGroupSpecs": []}})


def test_admitted_gpus_sums_the_pod_sets_and_a_workload_without_admission_has_none() -> None:
    assert tl.admitted_gpus(workload("rc", 2)) == 2
    assert tl.admitted_gpus({"status": {}}) == 0


def test_quota_is_released_by_deletion_finishing_or_no_gpu_admitted() -> None:
    held = workload("holder", 1)
    assert not tl.quota_released(tl.Seen(1.0, "MODIFIED", held))
    assert tl.quota_released(tl.Seen(1.0, "DELETED", held))
    assert tl.quota_released(tl.Seen(1.0, "MODIFIED", workload("holder", 0)))
    finished = workload("holder", 1, conditions=[{"type": "Finished", "status": "True"}])
    assert tl.quota_released(tl.Seen(1.0, "MODIFIED", finished))


def test_ownership_and_the_waiting_reason() -> None:
    waiting = workload("rc", 0, pendingReason="scale-up waiting: worker group `gpu-workers` of cluster `rc`")
    assert tl.owned_by(waiting, "RayCluster", "rc") and not tl.owned_by(waiting, "RayCluster", "holder-0")
    assert tl.waits_for_group(waiting) and not tl.waits_for_group(workload("rc", 0))


def test_first_takes_the_earliest_match_at_or_after_since() -> None:
    history = [
        tl.Seen(1.0, "ADDED", cluster(1)),
        tl.Seen(2.0, "MODIFIED", cluster(0)),
        tl.Seen(3.0, "MODIFIED", cluster(1)),
    ]
    asks = lambda s: tl.group_replicas(s.obj) >= 1  # noqa: E731
    assert tl.first(history, 0.0, asks) is history[0]
    assert tl.first(history, 1.5, asks) is history[2]
    assert tl.first(history, 3.5, asks) is None


def test_last_gone_waits_for_every_name_and_latest_drops_deleted_objects() -> None:
    pod = {"metadata": {"name": "a"}}
    history = [
        tl.Seen(1.0, "ADDED", pod),
        tl.Seen(2.0, "ADDED", {"metadata": {"name": "b"}}),
        tl.Seen(3.0, "DELETED", pod),
    ]
    assert tl.last_gone(history, 0.0, ["a", "b"]) is None
    assert tl.latest(history) == {"b": {"metadata": {"name": "b"}}}
    history.append(tl.Seen(5.0, "DELETED", {"metadata": {"name": "b"}}))
    assert tl.last_gone(history, 0.0, ["a", "b"]) == 5.0
    assert tl.last_gone(history, 4.0, ["a", "b"]) is None  # a's deletion came before 4.0


def test_intervals_keep_only_spans_whose_marks_the_round_has() -> None:
    marks = {tl.REQUEST: 10.0, tl.POD_RUNNING: 10.5, tl.NODE_JOINED: 22.0}
    assert tl.intervals(marks, tl.FREE_SPANS) == {
        "autoscaler's request -> pod Running": 0.5,
        "autoscaler's request -> Ray node joined": 12.0,
        "pod Running -> Ray node joined": 11.5,
    }


def test_summarize_gives_nearest_rank_p50_and_max_per_interval() -> None:
    rounds = [{"x": 3.0, "y": 1.0}, {"x": 1.0}, {"x": 2.0, "z": 7.0}, {"x": 10.0}]
    summary = tl.summarize(rounds)
    assert list(summary) == ["x", "y", "z"]
    assert summary["x"] == tl.Stat(4, 2.0, 10.0)
    assert summary["z"] == tl.Stat(1, 7.0, 7.0)


def test_parse_loadavg_reads_three_averages_and_names_a_bad_line() -> None:
    assert tl.parse_loadavg("16.82 13.21 9.31 5/812 12345\n") == (16.82, 13.21, 9.31)
    with pytest.raises(ValueError, match="/proc/loadavg"):
        tl.parse_loadavg("1.0 2.0")


def test_driver_answer_is_the_last_answer_line_among_rays_warnings() -> None:
    output = '(raylet) warning: lease pending\nANSWER {"pod": "rc-gpu-workers-x", "at": 12.5}\n'
    assert driver_answer(output) == ("rc-gpu-workers-x", 12.5)
    assert driver_answer("(raylet) warning\n") is None


def test_the_unqueued_cluster_has_the_flavors_placement_and_no_queue_label() -> None:
    queued, unqueued = scaled_cluster("v2", queued=True), scaled_cluster("v2", queued=False)
    assert "kueue.x-k8s.io/queue-name" in queued["metadata"]["labels"]
    assert "labels" not in unqueued["metadata"]
    pod = unqueued["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert pod["nodeSelector"] == {"rayquota.io/gpu-pool": "a100"}
    assert "nodeSelector" not in queued["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    v1 = scaled_cluster("v1", queued=True)["spec"]
    assert (
        v1["autoscalerOptions"]["idleTimeoutSeconds"] > 0
        and "idleTimeoutSeconds" not in v1["workerGroupSpecs"][0]
    )
    assert '"/spec/autoscalerOptions/idleTimeoutSeconds"' in idle_timeout_patch("v1", 5)
    assert '"/spec/workerGroupSpecs/0/idleTimeoutSeconds"' in idle_timeout_patch("v2", 5)


def test_the_holder_is_a_fixed_one_gpu_worker_without_an_autoscaler() -> None:
    holder = holder_cluster("holder-0")
    group = holder["spec"]["workerGroupSpecs"][0]
    assert holder["metadata"]["name"] == "holder-0" and not holder["spec"]["enableInTreeAutoscaling"]
    assert (group["replicas"], group["groupName"]) == (1, "holders")
    assert group["template"]["spec"]["containers"][0]["resources"]["limits"][tl.GPU] == "1"


def test_alive_worker_nodes_reads_the_state_apis_answer() -> None:
    rows = [
        {"node_id": "h", "state": "ALIVE", "is_head_node": True},
        {"node_id": "w1", "state": "DEAD", "is_head_node": False},
        {"node_id": "w2", "state": "ALIVE", "is_head_node": False},
    ]
    assert tl.alive_worker_nodes({"result": True, "data": {"result": {"total": 3, "result": rows}}}) == ["w2"]
    assert tl.alive_worker_nodes({"result": False, "msg": "busy"}) == []


def test_ray_nodes_keeps_each_nodes_first_sighting_and_rides_out_a_busy_dashboard() -> None:
    answers: list[Any] = [["w1"], OSError("busy"), ["w1", "w2"]]

    def alive() -> list[str]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return list(answer)

    nodes = RayNodes(alive)
    nodes.tick()
    first = nodes.joined["w1"]
    known = list(nodes.joined)
    assert nodes.first_new(known) is None
    nodes.tick()
    assert list(nodes.joined) == ["w1"]
    nodes.tick()
    assert nodes.joined["w1"] == first
    assert nodes.first_new(known) == nodes.joined["w2"] >= first
