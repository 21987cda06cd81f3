"""An eviction's restore (the placement taken out of the templates) stays owed until it is
applied in full: a 409 on its PUT, or a Job whose start time had to be cleared first, used to
leave the placement in place for good, as the next reconcile finds the object pending."""

from __future__ import annotations

from typing import Any, cast

import pytest

from rayquota.operator.core import ObjectKey
from rayquota.operator.kube import Conflict, KubeClient
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.workloads.restores import OwedRestores
from tests.unit.queue.test_adapters import FLAVORS, admit_all
from tests.unit.queue.test_job_adapter import job

JOB = ADAPTERS["Job"]
KEY = ObjectKey("team-a", "job-train")


class FakeClient:
    def __init__(self, conflicts: int = 0) -> None:
        self.conflicts = conflicts
        self.puts: list[dict[str, Any]] = []
        self.status_patches: list[dict[str, Any]] = []

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict("PUT", path, 409, "stale")
        self.puts.append(body)
        return body

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.status_patches.append(body)
        return body


def placed_job(**status: Any) -> dict[str, Any]:
    body = job()
    [edit] = JOB.run_with(body, [], admit_all(JOB.pod_sets(body, [])), FLAVORS)
    placed = {**edit.body, "spec": {**edit.body["spec"], "suspend": True}}
    if status:
        placed["status"] = status
    return placed


def node_selector(body: dict[str, Any]) -> Any:
    return body["spec"]["template"]["spec"].get("nodeSelector")


async def test_a_restore_that_met_a_conflict_stays_owed_until_it_is_applied() -> None:
    client = FakeClient(conflicts=1)
    restores = OwedRestores(cast(KubeClient, client))
    restores.owe(KEY)
    with pytest.raises(Conflict):
        await restores.pay(KEY, JOB, placed_job(), [])
    assert KEY in restores
    await restores.pay(KEY, JOB, placed_job(), [])
    assert KEY not in restores
    [put] = client.puts
    assert node_selector(put) is None and put["spec"]["suspend"] is True


async def test_a_started_job_is_owed_its_template_once_its_start_time_is_cleared() -> None:
    client = FakeClient()
    restores = OwedRestores(cast(KubeClient, client))
    restores.owe(KEY)
    started = placed_job(startTime="2026-01-01T00:00:00Z")
    await restores.pay(KEY, JOB, started, [])
    assert client.status_patches == [{"status": {"startTime": None}}] and not client.puts
    assert KEY in restores  # the template may change only now: the Job's watch brings us back
    await restores.pay(KEY, JOB, placed_job(), [])
    assert KEY not in restores and node_selector(client.puts[0]) is None


async def test_nothing_left_to_restore_pays_the_debt() -> None:
    client = FakeClient()
    restores = OwedRestores(cast(KubeClient, client))
    restores.owe(KEY)
    await restores.pay(KEY, JOB, job(), [])
    assert KEY not in restores and not client.puts and not client.status_patches
    restores.owe(KEY)
    restores.forget(KEY)
    assert KEY not in restores
