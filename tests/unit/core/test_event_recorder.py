"""The recorder's aggregation and spam filter, against an in-memory stand-in for the Events API
(the real API server is exercised in tests/integration/test_operator_core.py)."""

from __future__ import annotations

from typing import Any

from rayquota.operator.core.events import EventRecorder
from rayquota.operator.kube import NotFound


class EventsApi:
    def __init__(self) -> None:
        self.events: dict[str, dict[str, Any]] = {}
        self.patches = 0

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.events[body["metadata"]["name"]] = body
        return body

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        name = path.rsplit("/", 1)[-1]
        if name not in self.events:
            raise NotFound("PATCH", path, 404, "{}")
        self.events[name].update(patch)
        self.patches += 1
        return self.events[name]


OBJ = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "c", "namespace": "n", "uid": "u"},
}


async def drain(recorder: EventRecorder) -> None:
    await recorder.drain(timeout_s=5)


async def test_repeats_bump_count_instead_of_new_events() -> None:
    api = EventsApi()
    now = [0.0]
    recorder = EventRecorder(api, clock=lambda: now[0])  # type: ignore[arg-type]
    for _ in range(10):
        recorder.post(OBJ, "Warning", "FailedCreate", "quota exceeded")
        now[0] += 1
    await drain(recorder)
    assert len(api.events) == 1
    (event,) = api.events.values()
    assert event["count"] == 10 and event["involvedObject"]["uid"] == "u"


async def test_similar_messages_are_combined_after_ten() -> None:
    api = EventsApi()
    now = [0.0]
    recorder = EventRecorder(api, burst=1000, clock=lambda: now[0])  # type: ignore[arg-type]
    for i in range(50):
        recorder.post(OBJ, "Warning", "FailedToCreateWorkerPod", f'pods "w-{i}" is forbidden: quota')
        now[0] += 0.1
    await drain(recorder)
    assert len(api.events) == 11  # ten distinct, then one combined series
    combined = [e for e in api.events.values() if e["message"].startswith("(combined from similar events)")]
    assert len(combined) == 1 and combined[0]["count"] == 40
    assert 'pods "w-49"' in combined[0]["message"]


async def test_a_failure_loop_is_bounded_per_object() -> None:
    api = EventsApi()
    now = [0.0]
    recorder = EventRecorder(  # type: ignore[arg-type]
        api, burst=25, refill_s=300, similar_limit=10_000, clock=lambda: now[0]
    )
    for i in range(500):
        recorder.post(OBJ, "Warning", "FailedCreate", f"attempt {i}")  # distinct messages: no aggregation
        now[0] += 0.02
    await drain(recorder)
    assert len(api.events) == 25
    assert recorder.dropped == 475
    now[0] += 300  # one token back after the refill period
    recorder.post(OBJ, "Warning", "FailedCreate", "later")
    await drain(recorder)
    assert len(api.events) == 26
    # Another reason has its own budget: a milestone is not starved by a failure loop.
    recorder.post(OBJ, "Normal", "UpgradeFinished", "done")
    await drain(recorder)
    assert len(api.events) == 27


async def test_a_new_series_starts_after_the_window() -> None:
    api = EventsApi()
    now = [0.0]
    recorder = EventRecorder(api, window_s=600, clock=lambda: now[0])  # type: ignore[arg-type]
    recorder.post(OBJ, "Normal", "Created", "pod p")
    await drain(recorder)
    now[0] += 601
    recorder.post(OBJ, "Normal", "Created", "pod p")
    await drain(recorder)
    assert len(api.events) == 2
