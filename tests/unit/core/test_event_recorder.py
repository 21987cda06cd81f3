"""The recorder's correlation, checked against client-go's rules (tools/record/events_cache.go),
with an in-memory stand-in for the Events API (the real API server is exercised in
tests/integration/ray/test_operator_core_behaviour.py)."""

from __future__ import annotations

from typing import Any

from rayquota.operator.core.event_correlator import EventCorrelator, EventSource
from rayquota.operator.core.events import EventRecorder
from rayquota.operator.kube import NotFound

COMBINED = "(combined from similar events): "


class EventsApi:
    def __init__(self) -> None:
        self.events: dict[str, dict[str, Any]] = {}
        self.creates = 0
        self.patches = 0

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.events[body["metadata"]["name"]] = body
        self.creates += 1
        return body

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        name = path.rsplit("/", 1)[-1]
        if name not in self.events:
            raise NotFound("PATCH", path, 404, "{}")
        self.events[name].update(patch)
        self.patches += 1
        return self.events[name]

    def with_reason(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.events.values() if e["reason"] == reason]


def obj(name: str = "c", uid: str = "u") -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "n", "uid": uid},
    }


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def recorder_with(api: EventsApi, clock: Clock, **correlator: Any) -> EventRecorder:
    return EventRecorder(api, correlator=EventCorrelator(**correlator), clock=clock)  # type: ignore[arg-type]


async def test_repeats_patch_the_count_of_one_event() -> None:
    api, clock = EventsApi(), Clock()
    recorder = recorder_with(api, clock)
    for _ in range(10):
        recorder.post(obj(), "Warning", "FailedCreate", "quota exceeded")
        clock.now += 1
    await recorder.drain()
    (event,) = api.events.values()
    assert event["count"] == 10 and event["involvedObject"]["uid"] == "u"
    assert (api.creates, api.patches) == (1, 9)
    assert event["metadata"]["name"].startswith("c.")


async def test_the_tenth_different_message_is_combined_and_later_ones_join_it() -> None:
    api, clock = EventsApi(), Clock()
    recorder = recorder_with(api, clock, burst=1000)
    for i in range(50):
        recorder.post(obj(), "Warning", "FailedToCreateWorkerPod", f'pods "w-{i}" is forbidden: quota')
        clock.now += 0.1
    await recorder.drain()
    # client-go: nine distinct messages stay separate; the tenth opens the combined Event.
    assert len(api.events) == 10
    (combined,) = [e for e in api.events.values() if e["message"].startswith(COMBINED)]
    assert combined["count"] == 41
    assert combined["message"] == COMBINED + 'pods "w-49" is forbidden: quota'


async def test_a_message_still_remembered_counts_on_its_own_event_after_aggregation() -> None:
    correlator = EventCorrelator()
    source = EventSource("op", "RayCluster", "n", "c", "u", "ray.io/v1")
    verdicts = [correlator.correlate(source, "Warning", "R", f"m{i}", float(i), "t") for i in range(10)]
    assert [v.message.startswith(COMBINED) for v in verdicts] == [False] * 9 + [True]
    for i, verdict in enumerate(verdicts):
        correlator.created(verdict, f"event-{i}")
    # The oldest message (m0) left the group when it reached ten; m5 is still in it.
    again = correlator.correlate(source, "Warning", "R", "m5", 11.0, "t")
    assert (again.message, again.existing, again.count) == ("m5", "event-5", 2)
    forgotten = correlator.correlate(source, "Warning", "R", "m0", 12.0, "t")
    assert forgotten.message == COMBINED + "m0"
    assert (forgotten.existing, forgotten.count) == ("event-9", 2)


async def test_a_group_idle_for_ten_minutes_starts_afresh() -> None:
    correlator = EventCorrelator()
    source = EventSource("op", "RayCluster", "n", "c", "u", "ray.io/v1")
    for i in range(10):
        correlator.correlate(source, "Warning", "R", f"m{i}", float(i), "t")
    # Still within ten minutes of the last similar event (not of the first): combined.
    assert correlator.correlate(source, "Warning", "R", "x", 9.0 + 600, "t").message.startswith(COMBINED)
    fresh = correlator.correlate(source, "Warning", "R", "y", 9.0 + 600 + 601, "t")
    assert fresh.message == "y" and fresh.existing is None


async def test_the_spam_filter_is_one_bucket_per_object_whatever_the_reason() -> None:
    api, clock = EventsApi(), Clock()
    recorder = recorder_with(api, clock)
    for i in range(40):
        recorder.post(obj(), "Normal", f"Reason{i}", "m")  # all different: no aggregation, no repeats
        clock.now += 0.01
    await recorder.drain()
    assert len(api.events) == 25 and recorder.dropped == 15
    # Another object has its own bucket.
    recorder.post(obj("other", "u2"), "Normal", "Reason0", "m")
    await recorder.drain()
    assert len(api.events) == 26
    # One token back every five minutes.
    clock.now += 299
    recorder.post(obj(), "Normal", "Late", "m")
    await recorder.drain()
    assert len(api.events) == 26
    clock.now += 2
    recorder.post(obj(), "Normal", "Later", "m")
    await recorder.drain()
    assert len(api.events) == 27 and api.with_reason("Later")


async def test_patches_spend_tokens_and_the_count_includes_dropped_repeats() -> None:
    api, clock = EventsApi(), Clock()
    recorder = recorder_with(api, clock)
    for _ in range(100):
        recorder.post(obj(), "Warning", "BackOff", "same")
    await recorder.drain()
    (event,) = api.events.values()
    assert api.creates + api.patches == 25 and event["count"] == 25
    clock.now += 300  # one token: the next write carries every occurrence so far
    recorder.post(obj(), "Warning", "BackOff", "same")
    await recorder.drain()
    assert event["count"] == 101


async def test_an_expired_event_is_created_again_with_its_count() -> None:
    api, clock = EventsApi(), Clock()
    recorder = recorder_with(api, clock)
    recorder.post(obj(), "Normal", "Created", "pod p")
    await recorder.drain()
    api.events.clear()  # the API server's TTL removed it
    recorder.post(obj(), "Normal", "Created", "pod p")
    await recorder.drain()
    (event,) = api.events.values()
    assert event["count"] == 2 and event["message"] == "pod p"


async def test_tables_are_bounded() -> None:
    correlator = EventCorrelator(remembered=3)
    for i in range(10):
        source = EventSource("op", "RayCluster", "n", f"c{i}", f"u{i}", "ray.io/v1")
        correlator.correlate(source, "Normal", "R", "m", float(i), "t")
    first = EventSource("op", "RayCluster", "n", "c0", "u0", "ray.io/v1")
    # Forgotten: c0's repeat starts a new Event rather than patching one.
    assert correlator.correlate(first, "Normal", "R", "m", 20.0, "t").count == 1
