"""The tables of `rayquota queues` / `workloads` (and `kubectl rayquota`'s): `-o wide`'s columns,
and both API groups' shapes read alike."""

from __future__ import annotations

import re
from typing import Any

import pytest

from rayquota import cli_tables
from rayquota.cli_views import QueueState
from rayquota.operator.queue.kueue.kueue_shapes import workload_spec_to_kueue, workload_status_to_kueue
from tests.unit.queue.test_cli_views import gpu_queue, job_workload, state

NEVER_FITS = (
    "can never be admitted: insufficient quota for nvidia.com/gpu in flavor a100, "
    "request > maximum capacity (16 > 8)"
)


def cells(text: str) -> list[dict[str, str]]:
    """Each row as {column: cell}, the columns where the header's names start."""
    header, *rows = text.splitlines()
    starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", header)]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    return [
        {n: row[a:b].strip() for n, a, b in zip(names, starts, [*starts[1:], None], strict=True)}
        for row in rows
    ]


def broken_queue() -> dict[str, Any]:
    """A Kueue-shaped queue (cohortName) naming a flavor that does not exist, inactive for it."""
    queue = gpu_queue("broken", 4)
    group = queue["spec"]["resourceGroups"][0]
    group["flavors"].append({"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]})
    queue["spec"].update(cohortName="research", queueingStrategy="StrictFIFO")
    queue["status"]["conditions"] = [
        {
            "type": "Active",
            "status": "False",
            "reason": "FlavorNotFound",
            "message": "Can't admit new workloads: ResourceFlavor h100 not found",
        }
    ]
    return queue


def test_queues_wide_adds_the_strategy_the_flavors_and_why_a_queue_is_inactive() -> None:
    queue_state = state()
    queue_state.cluster_queues[0]["status"]["conditions"] = [{"type": "Active", "status": "True"}]
    queue_state.cluster_queues.append(broken_queue())
    default = cells(cli_tables.queues_table(queue_state))
    assert list(default[0]) == cli_tables.QUEUES_HEADER
    wide = {row["CLUSTERQUEUE"]: row for row in cells(cli_tables.queues_table(queue_state, wide=True))}
    assert list(wide["team"]) == cli_tables.QUEUES_HEADER + cli_tables.QUEUES_WIDE
    assert wide["broken"] == {
        **{k: v for k, v in wide["broken"].items() if k not in ("COHORT", *cli_tables.QUEUES_WIDE)},
        "COHORT": "research",
        "QUEUEING STRATEGY": "StrictFIFO",
        "FLAVORS": "a100, h100 (no such ResourceFlavor)",
        "WHY INACTIVE": "Can't admit new workloads: ResourceFlavor h100 not found",
    }
    assert wide["broken"]["ACTIVE"] == "False (FlavorNotFound)"
    assert (wide["team"]["FLAVORS"], wide["team"]["WHY INACTIVE"], wide["team"]["COHORT"]) == (
        "a100",
        "-",
        "-",
    )


def test_workloads_wide_adds_the_flavors_admitted_on_and_the_priority() -> None:
    queue_state = state()
    first = queue_state.workloads[0]
    assignment = first["status"]["admission"]["podSetAssignments"][0]
    assignment["flavors"] = {"nvidia.com/gpu": "a100", "cpu": "default", "memory": "default"}
    first["spec"]["priorityClassName"] = "high"
    first["spec"]["priority"] = 100
    second = queue_state.workloads[1]
    second["status"] = {"pendingReason": "waits its turn"}
    default = cells(cli_tables.workloads_table(queue_state))
    assert list(default[0]) == cli_tables.WORKLOADS_HEADER
    rows = {row["OWNER"]: row for row in cells(cli_tables.workloads_table(queue_state, wide=True))}
    assert list(rows["rayjob/first"])[-3:] == ["FLAVORS", "PRIORITY", "REASON"]  # the reason stays last
    assert rows["rayjob/first"]["FLAVORS"] == "a100 (nvidia.com/gpu), default (cpu, memory)"
    assert rows["rayjob/first"]["PRIORITY"] == "100 (high)"
    assert (rows["rayjob/second"]["FLAVORS"], rows["rayjob/second"]["PRIORITY"]) == ("-", "0")
    assert rows["rayjob/second"]["REASON"] == "waits its turn"


def test_a_kueue_shaped_workload_shows_its_pending_reason_and_priority_class() -> None:
    """Kueue's shape has no pendingReason: the words are QuotaReserved=False's message (as the
    operator writes them in Kueue-API mode, and as Kueue does)."""
    queue_state = state()
    huge = job_workload("huge", 16, "2026-01-01T00:03:00Z", admitted=False)
    huge["spec"]["priorityClassName"] = "low"
    huge["spec"]["priority"] = 5
    reserved = {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "ExceedsMaxQuota",
        "message": NEVER_FITS,
        "lastTransitionTime": "2026-01-01T00:03:01Z",
    }
    rayquota_status = {"pendingReason": NEVER_FITS, "conditions": [reserved]}
    kueue_body = {
        **huge,
        "spec": workload_spec_to_kueue(huge["spec"]),
        "status": workload_status_to_kueue(rayquota_status),
    }
    assert "pendingReason" not in kueue_body["status"] and "priorityClassRef" in kueue_body["spec"]
    queue_state.workloads = [{**huge, "status": rayquota_status}]
    in_rayquota = cells(cli_tables.workloads_table(queue_state, wide=True))
    queue_state.workloads = [kueue_body]
    in_kueue = cells(cli_tables.workloads_table(queue_state, wide=True))
    assert in_kueue == in_rayquota
    assert (in_kueue[0]["STATUS"], in_kueue[0]["REASON"]) == ("Inadmissible", NEVER_FITS)
    assert (in_kueue[0]["PRIORITY"], in_kueue[0]["REQUESTS"]) == ("5 (low)", "nvidia.com/gpu 16")


def test_no_pending_reason_once_admitted_or_finished() -> None:
    stale = {"type": "QuotaReserved", "status": "False", "message": "old words"}
    admitted = job_workload("a", 1, "2026-01-01T00:00:00Z", admitted=True)
    admitted["status"]["conditions"].append(stale)
    finished = job_workload("f", 1, "2026-01-01T00:00:00Z", admitted=False)
    finished["status"]["conditions"] = [stale, {"type": "Finished", "status": "True"}]
    assert cli_tables.pending_reason(admitted) == cli_tables.pending_reason(finished) == ""
    assert cli_tables.pending_reason({"status": {"conditions": [stale]}}) == "old words"


def test_rayquota_queues_and_workloads_take_wide_and_the_queue_api(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rayquota import cli, cli_views
    from rayquota.operator.queue.kueue.api_group import KUEUE, RAYQUOTA, QueueApi

    asked: list[tuple[str | None, QueueApi]] = []

    async def fetched(namespace: str | None = None, api: QueueApi = RAYQUOTA) -> QueueState:
        asked.append((namespace, api))
        return state()

    monkeypatch.setattr(cli_views, "fetch_state", fetched)
    monkeypatch.delenv("RAYQUOTA_QUEUE_API", raising=False)
    assert cli.main(["queues", "-o", "wide", "--queue-api", "kueue"]) == 0
    assert "WHY INACTIVE" in capsys.readouterr().out.splitlines()[0]
    assert cli.main(["workloads", "-n", "ns"]) == 0
    assert "FLAVORS" not in capsys.readouterr().out.splitlines()[0]
    assert asked == [(None, KUEUE), ("ns", RAYQUOTA)]
    monkeypatch.setenv("RAYQUOTA_QUEUE_API", "kueue")
    assert cli.main(["explain", "rayjob/first", "-n", "ns"]) == 0
    assert asked[-1] == (None, KUEUE)
