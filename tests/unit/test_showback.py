"""Showback over a scripted history: Workload statuses as the operator writes them, a window
cutting through them, resource-hours per group."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from rayquota import showback, showback_prometheus

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp()
HOUR = 3600.0


def stamp(offset_h: float) -> str:
    moment = dt.datetime.fromtimestamp(T0 + offset_h * HOUR, dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(type_: str, status: bool, at_h: float, reason: str = "r") -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True" if status else "False",
        "reason": reason,
        "lastTransitionTime": stamp(at_h),
    }


def workload(
    name: str,
    *,
    namespace: str = "team-a",
    queue: str = "lq",
    conditions: list[dict[str, Any]],
    admission: dict[str, Any] | None = None,
    requests: dict[str, str] | None = None,
    count: int = 1,
) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": conditions}
    if admission is not None:
        status["admission"] = admission
    pod_set = {"name": "main", "count": count, "requests": requests or {"nvidia.com/gpu": "1"}}
    return {
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"queueName": queue, "podSets": [pod_set]},
        "status": status,
    }


def admission(cluster_queue: str, *usages: dict[str, str]) -> dict[str, Any]:
    return {
        "clusterQueue": cluster_queue,
        "podSetAssignments": [
            {"name": f"ps{i}", "count": 1, "flavors": {}, "resourceUsage": u} for i, u in enumerate(usages)
        ],
    }


def local_queue(namespace: str, name: str, cluster_queue: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"clusterQueue": cluster_queue}}


def report(
    workloads: list[dict[str, Any]], since_h: float, until_h: float, by: showback.GroupBy = "clusterqueue"
) -> dict[str, Any]:
    queues = [local_queue("team-a", "lq", "cq-a"), local_queue("team-b", "lq", "cq-b")]
    return showback.usage_report(workloads, queues, T0 + since_h * HOUR, T0 + until_h * HOUR, by)


def hours_of(result: dict[str, Any], key: str, resource: str = "nvidia.com/gpu") -> float:
    row = next(r for r in result["rows"] if r["key"] == key)
    return float(row["hours"][resource])


def test_running_admission_is_clipped_to_both_window_edges() -> None:
    running = workload(
        "w", conditions=[cond("QuotaReserved", True, 1)], admission=admission("cq-a", {"nvidia.com/gpu": "4"})
    )
    # Admitted at 1h, still holding: [1h, 3h] of a [2h, 3h] window is 1 h x 4 GPUs.
    assert hours_of(report([running], 2, 3), "cq-a") == pytest.approx(4.0)
    # A window starting before the admission counts from the admission.
    assert hours_of(report([running], 0, 3), "cq-a") == pytest.approx(8.0)
    # A window ending before it: nothing.
    assert report([running], -2, 0.5)["rows"] == []


def test_finished_workload_counts_until_finished_and_is_marked_estimated() -> None:
    done = workload(
        "done",
        conditions=[cond("QuotaReserved", True, 1), cond("Finished", True, 2.5)],
        requests={"nvidia.com/gpu": "2", "cpu": "500m"},
        count=3,
    )
    result = report([done], 0, 10)
    # 1.5 h x (2 GPUs x 3 pods); the ClusterQueue is the one its LocalQueue points at.
    assert hours_of(result, "cq-a") == pytest.approx(9.0)
    assert hours_of(result, "cq-a", "cpu") == pytest.approx(1.5 * 1.5)
    assert result["rows"][0]["estimated"] is True
    # Clipped at the window's start too.
    assert hours_of(report([done], 2, 10), "cq-a") == pytest.approx(3.0)


def test_finished_workload_with_its_admission_still_recorded_is_exact() -> None:
    done = workload(
        "done",
        conditions=[cond("QuotaReserved", True, 0), cond("Finished", True, 1)],
        admission=admission("cq-x", {"nvidia.com/gpu": "2"}),
        requests={"nvidia.com/gpu": "8"},
    )
    result = report([done], 0, 5)
    assert hours_of(result, "cq-x") == pytest.approx(2.0)
    assert result["rows"][0]["estimated"] is False


def test_readmitted_workload_counts_from_its_latest_admission_and_evicted_pending_is_unrecoverable() -> None:
    readmitted = workload(
        "again",
        conditions=[cond("QuotaReserved", True, 3), cond("Requeued", True, 2)],
        admission=admission("cq-a", {"nvidia.com/gpu": "1"}),
    )
    evicted_pending = workload(
        "waiting",
        conditions=[cond("QuotaReserved", False, 2), cond("Evicted", False, 2, "QuotaReleased")],
    )
    never = workload("never", conditions=[cond("QuotaReserved", False, 0)])
    result = report([readmitted, evicted_pending, never], 0, 4)
    assert hours_of(result, "cq-a") == pytest.approx(1.0)
    assert result["rows"][0]["workloads"] == 1
    assert len(result["unrecoverable"]) == 1 and "team-a/waiting" in result["unrecoverable"][0]


def test_evicted_but_not_yet_released_still_holds_quota() -> None:
    evicting = workload(
        "evicting",
        conditions=[cond("QuotaReserved", True, 0), cond("Evicted", True, 1)],
        admission=admission("cq-a", {"nvidia.com/gpu": "2"}),
    )
    assert hours_of(report([evicting], 0, 2), "cq-a") == pytest.approx(4.0)


def test_several_resources_pod_sets_and_groupings() -> None:
    big = workload(
        "big",
        conditions=[cond("QuotaReserved", True, 0)],
        admission=admission(
            "cq-a", {"nvidia.com/gpu": "2", "memory": "4Gi"}, {"nvidia.com/gpu": "6", "cpu": "3"}
        ),
    )
    other = workload(
        "other",
        namespace="team-b",
        conditions=[cond("QuotaReserved", True, 1)],
        admission=admission("cq-a", {"nvidia.com/gpu": "1"}),
    )
    by_cq = report([big, other], 0, 2)
    assert by_cq["resources"] == ["nvidia.com/gpu", "cpu", "memory"]
    assert hours_of(by_cq, "cq-a") == pytest.approx(8 * 2 + 1)
    assert hours_of(by_cq, "cq-a", "memory") == pytest.approx(8.0)  # GiB-hours
    assert hours_of(by_cq, "cq-a", "cpu") == pytest.approx(6.0)
    by_ns = report([big, other], 0, 2, "namespace")
    assert [r["key"] for r in by_ns["rows"]] == ["team-a", "team-b"]
    assert hours_of(by_ns, "team-b") == pytest.approx(1.0)
    by_lq = report([big, other], 0, 2, "localqueue")
    assert {r["key"] for r in by_lq["rows"]} == {"team-a/lq", "team-b/lq"}


def test_csv_and_table_carry_the_numbers() -> None:
    running = workload(
        "w", conditions=[cond("QuotaReserved", True, 0)], admission=admission("cq-a", {"nvidia.com/gpu": "3"})
    )
    result = report([running], 0, 2)
    lines = showback.report_csv(result).splitlines()
    assert lines[0] == "clusterqueue,nvidia.com/gpu (hours),workloads,estimated"
    assert lines[1] == "cq-a,6.000000,1,false"
    assert "6.00" in showback.report_table(result)


def test_bad_window_and_grouping_are_refused_naming_the_value() -> None:
    with pytest.raises(ValueError, match="by='team'"):
        showback.usage_rows([], 0, 1, "team")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="until must come after since"):
        showback.usage_rows([], 5, 1, "namespace")
    with pytest.raises(ValueError, match="--since='yesterday'"):
        showback.window("yesterday", None, T0)
    with pytest.raises(ValueError, match="--until"):
        showback.window("1h", "2h", T0)


def test_window_durations_and_times() -> None:
    assert showback.window("24h", None, T0) == (T0 - 24 * HOUR, T0)
    assert showback.window("90m", "30m", T0) == (T0 - 1.5 * HOUR, T0 - 0.5 * HOUR)
    assert showback.window("2026-01-01T00:00:00Z", "now", T0 + 10) == (T0, T0 + 10)


def test_prometheus_integral_query_and_answer() -> None:
    query = showback_prometheus.integral_query(86400, 15)
    assert query == (
        "sum by (cluster_queue, resource) (sum_over_time((max by (cluster_queue, flavor, resource) "
        "(rayquota_cluster_queue_resource_usage))[86400s:15s])) * 15 / 3600"
    )
    assert showback_prometheus.step_for(3600, 15) == 15
    assert showback_prometheus.step_for(5, 15) == 5  # a window shorter than the step: one sample
    assert showback_prometheus.step_for(30 * 86400, 15) == 236  # at most 11,000 steps
    answer = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"cluster_queue": "a", "resource": "nvidia.com/gpu"}, "value": [1, "2.5"]},
                {"metric": {"cluster_queue": "b", "resource": "nvidia.com/gpu"}, "value": [1, "7"]},
                {"metric": {"cluster_queue": "b", "resource": "memory"}, "value": [1, str(3 * 2**30)]},
            ],
        },
    }
    hours = showback_prometheus.parse_vector(answer)
    assert hours == {"a": {"nvidia.com/gpu": 2.5}, "b": {"nvidia.com/gpu": 7.0, "memory": 3.0}}
    result = showback_prometheus.report_from(hours, 0, 1)
    assert [r["key"] for r in result["rows"]] == ["b", "a"]
    assert result["rows"][1]["hours"] == {"nvidia.com/gpu": 2.5, "memory": 0.0}
    assert "-" in showback.report_table(result).splitlines()[1]
    with pytest.raises(ValueError, match="bad_data: parse error"):
        showback_prometheus.parse_vector({"status": "error", "errorType": "bad_data", "error": "parse error"})


def test_cli_refuses_prometheus_with_another_grouping(capsys: pytest.CaptureFixture[str]) -> None:
    from rayquota import cli

    code = cli.main(["usage", "--by", "namespace", "--prometheus-url", "http://127.0.0.1:9"])
    assert code == 2
    assert "--prometheus-url counts per ClusterQueue only: not with --by=namespace" in capsys.readouterr().err
    assert cli.main(["usage", "--since", "yesterday"]) == 2
    assert "--since='yesterday'" in capsys.readouterr().err


# --- Kueue's shape: kueue.x-k8s.io/v1beta2 Workloads (Kueue-API mode, or Kueue's own) ----------


def kueue_workload(
    name: str, namespace: str, pod_sets: list[dict[str, Any]], status: dict[str, Any]
) -> dict[str, Any]:
    """A Workload as Kueue v1beta2 spells it: pod sets carry only a template, the priority is a
    priorityClassRef, the status has no pendingReason."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {
            "queueName": "lq",
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
            "priority": 100,
            "active": True,
            "podSets": pod_sets,
        },
        "status": status,
    }


def kueue_pod_set(name: str, count: int, **pod_spec: Any) -> dict[str, Any]:
    return {"name": name, "count": count, "template": {"spec": {"restartPolicy": "Never", **pod_spec}}}


def container(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, Any]:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    return {"name": "c", "image": "ray", "resources": resources}


def kueue_admitted(
    at_h: float, cluster_queue: str, assignments: list[dict[str, Any]], *later: dict[str, Any], **more: Any
) -> dict[str, Any]:
    """The status Kueue writes for a Workload admitted at ``at_h`` (QuotaReserved and Admitted
    true, the admission kept), with ``later`` conditions and other status fields after it."""
    admitted = [cond("QuotaReserved", True, at_h, "QuotaReserved"), cond("Admitted", True, at_h, "Admitted")]
    admission = {"clusterQueue": cluster_queue, "podSetAssignments": assignments}
    return {"conditions": [*admitted, *later], "admission": admission, **more}


def kueue_assignment(
    name: str, flavors: dict[str, str], usage: dict[str, str], **count: int
) -> dict[str, Any]:
    return {"name": name, "flavors": flavors, "resourceUsage": usage, **count}


def kueue_history() -> list[dict[str, Any]]:
    trainer = kueue_workload(
        "trainer",
        "team-a",
        [
            kueue_pod_set("head", 1, containers=[container({"cpu": "2", "memory": "8Gi"})]),
            kueue_pod_set("workers", 4, containers=[container({"cpu": "4"}, {"nvidia.com/gpu": "2"})]),
        ],
        # Preempted at 1h, admitted again at 2h: Kueue turns Evicted and Preempted False.
        kueue_admitted(
            2,
            "cq-a",
            [
                kueue_assignment(
                    "head", {"cpu": "default", "memory": "default"}, {"cpu": "2", "memory": "8Gi"}, count=1
                ),
                kueue_assignment(
                    "workers",
                    {"cpu": "default", "nvidia.com/gpu": "a100"},
                    {"cpu": "16", "nvidia.com/gpu": "8"},
                    count=4,
                ),
            ],
            cond("Evicted", False, 2, "QuotaReserved"),
            cond("Preempted", False, 2, "QuotaReserved"),
            cond("Requeued", True, 1, "Preempted"),
            cond("PodsReady", True, 2.1, "PodsReady"),
            schedulingStats={"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]},
            accumulatedPastExecutionTimeSeconds=3600,
        ),
    )
    # Kueue keeps a finished Workload's admission: exact.
    finished_by_kueue = kueue_workload(
        "done",
        "team-b",
        [kueue_pod_set("main", 1, containers=[container({"nvidia.com/gpu": "2"})])],
        kueue_admitted(
            1,
            "cq-b",
            [kueue_assignment("main", {"nvidia.com/gpu": "a100"}, {"nvidia.com/gpu": "2"})],
            cond("Finished", True, 4, "Succeeded"),
        ),
    )
    # rayquota drops it when the quota is released: sized from the template (a limit-only
    # GPU, an init container's peak, the pod overhead).
    finished_released = kueue_workload(
        "released",
        "team-a",
        [
            kueue_pod_set(
                "main",
                2,
                containers=[container({"nvidia.com/gpu": "1"}), container(limits={"cpu": "1"})],
                initContainers=[container({"cpu": "4"})],
                overhead={"cpu": "250m"},
            )
        ],
        {
            "conditions": [
                cond("QuotaReserved", True, 3, "QuotaReserved"),
                cond("Finished", True, 5, "Succeeded"),
            ]
        },
    )
    preempted_waiting = kueue_workload(
        "preempted",
        "team-a",
        [kueue_pod_set("main", 1, containers=[container({"nvidia.com/gpu": "4"})])],
        {
            "conditions": [
                cond("QuotaReserved", False, 6, "Pending"),
                cond("Admitted", False, 6, "NoReservation"),
                cond("Evicted", True, 6, "Preempted"),
                cond("Preempted", True, 6, "InClusterQueue"),
                cond("Requeued", True, 6, "Preempted"),
            ],
            "schedulingStats": {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]},
        },
    )
    pending = kueue_workload(
        "waiting",
        "team-b",
        [kueue_pod_set("main", 1, containers=[container({"nvidia.com/gpu": "16"})])],
        {"conditions": [cond("QuotaReserved", False, 0, "Pending")]},
    )
    return [trainer, finished_by_kueue, finished_released, preempted_waiting, pending]


def test_kueue_v1beta2_workload_history_is_read_as_kueue_writes_it() -> None:
    by_cq = report(kueue_history(), 0, 10)
    # cq-a: trainer 8 h x 8 GPUs (from its latest admission), released 2 h x 2 pods x 1 GPU.
    assert hours_of(by_cq, "cq-a") == pytest.approx(64 + 4)
    # cpu: trainer 8 h x 18; released 2 h x 2 pods x (init peak 4 + overhead 0.25).
    assert hours_of(by_cq, "cq-a", "cpu") == pytest.approx(8 * 18 + 2 * 2 * 4.25)
    assert hours_of(by_cq, "cq-a", "memory") == pytest.approx(8 * 8)
    assert hours_of(by_cq, "cq-b") == pytest.approx(3 * 2)
    rows = {r["key"]: r for r in by_cq["rows"]}
    assert (rows["cq-a"]["workloads"], rows["cq-a"]["estimated"]) == (2, True)
    assert (rows["cq-b"]["workloads"], rows["cq-b"]["estimated"]) == (1, False)
    [lost] = by_cq["unrecoverable"]
    assert lost.startswith("team-a/preempted:")
    by_lq = report(kueue_history(), 0, 10, "localqueue")
    assert hours_of(by_lq, "team-a/lq") == pytest.approx(68) and hours_of(by_lq, "team-b/lq") == 6


def test_a_history_reads_the_same_in_both_groups() -> None:
    """rayquota.io Workloads and the same ones as the operator writes them in Kueue-API mode
    (kueue_shapes' translation: requests into templates, no pendingReason, Kueue's reasons)."""
    from rayquota.operator.queue.kueue.kueue_shapes import workload_spec_to_kueue, workload_status_to_kueue

    history = [
        workload(
            "running",
            conditions=[cond("QuotaReserved", True, 1)],
            admission=admission("cq-a", {"nvidia.com/gpu": "4", "cpu": "2"}),
        ),
        workload(
            "done",
            namespace="team-b",
            conditions=[cond("QuotaReserved", True, 0), cond("Finished", True, 2.5)],
            requests={"nvidia.com/gpu": "2", "cpu": "500m", "memory": "3Gi"},
            count=3,
        ),
        workload(
            "evicted",
            conditions=[
                cond("QuotaReserved", False, 2),
                cond("Evicted", True, 2),
                cond("Preempted", True, 2),
            ],
        ),
    ]
    kueue = [
        {**w, "spec": workload_spec_to_kueue(w["spec"]), "status": workload_status_to_kueue(w["status"])}
        for w in history
    ]
    assert "requests" not in kueue[1]["spec"]["podSets"][0]  # only the template says it now
    for by in showback.GROUPINGS:
        assert report(kueue, 0, 4, by) == report(history, 0, 4, by)
    assert report(kueue, 0, 4)["rows"] != []
