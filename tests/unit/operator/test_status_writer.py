"""StatusWriter: exact writes only when the status differs, read-after-own-write, coalescing.

The API server is stood in for by a recorder of the requests the writer makes (a unit test of
the writer's decisions; the integration tests exercise the same writer on the real server)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, cast

import pytest

from rayquota.operator.core.resources import Resource
from rayquota.operator.core.status import StatusWriter
from rayquota.operator.kube import KubeClient, NotFound

RAYCLUSTERS = Resource("ray.io", "v1", "rayclusters", "RayCluster")


class RecordingClient:
    """Answers PUT/apply like the API server would: the body stored with a new resourceVersion
    (optionally normalised, as schema pruning would)."""

    def __init__(self, normalise: Any = None, gone: bool = False) -> None:
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.version = 100
        self.normalise = normalise
        self.gone = gone

    def _store(self, verb: str, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        if self.gone:
            raise NotFound(verb, path, 404, "gone")
        self.requests.append((verb, path, dict(body)))
        self.version += 1
        stored = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
        if self.normalise is not None:
            stored["status"] = self.normalise
        return stored

    async def replace(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._store("PUT", path, body)

    async def apply(self, path: str, body: Mapping[str, Any], field_manager: str) -> dict[str, Any]:
        return self._store(f"APPLY:{field_manager}", path, body)


def cluster(status: Mapping[str, Any] | None, version: str = "7") -> dict[str, Any]:
    meta = {"name": "c", "namespace": "ns", "uid": "u-1", "resourceVersion": version}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "status": status}


def writer(client: RecordingClient) -> StatusWriter:
    return StatusWriter(cast(KubeClient, client))


async def test_an_unchanged_status_is_not_written_and_null_equals_absent() -> None:
    client = RecordingClient()
    w = writer(client)
    obj = cluster({"state": "ready", "head": {"podIP": None}})
    stored = await w.write(RAYCLUSTERS, obj, {"state": "ready", "head": {}})
    assert client.requests == [] and w.writes == 0
    assert stored is not None and stored["status"]["state"] == "ready"


async def test_the_computed_status_replaces_the_stored_one_with_its_resource_version() -> None:
    client = RecordingClient()
    w = writer(client)
    obj = cluster({"state": "ready", "head": {"podName": "h", "podIP": "10.0.0.1"}})
    await w.write(RAYCLUSTERS, obj, {"state": "ready", "head": {"podName": None}})
    [(verb, path, body)] = client.requests
    assert verb == "PUT" and path == "/apis/ray.io/v1/namespaces/ns/rayclusters/c/status"
    # The nested keys that went away are gone from what is sent, not patched to null.
    assert body["status"] == {"state": "ready", "head": {}}
    assert body["metadata"]["resourceVersion"] == "7"


async def test_a_status_the_server_normalised_is_not_written_again() -> None:
    client = RecordingClient(normalise={"state": "ready"})
    w = writer(client)
    stored = await w.write(RAYCLUSTERS, cluster({}), {"state": "ready", "unknownField": 1})
    assert stored is not None
    # The same computation on the stored object (as the watch delivers it) writes nothing.
    await w.write(RAYCLUSTERS, stored, {"state": "ready", "unknownField": 1})
    assert len(client.requests) == 1


async def test_a_cache_older_than_our_write_is_stale_until_the_watch_delivers_it() -> None:
    client = RecordingClient()
    w = writer(client)
    old = cluster({"state": "pending"}, version="7")
    stored = await w.write(RAYCLUSTERS, old, {"state": "ready"})
    assert stored is not None
    assert w.is_stale(old)
    w.observe("RayCluster", stored, old)
    assert not w.is_stale(old)  # the cache has caught up; the old copy no longer blocks
    assert not w.is_stale(stored)


async def test_staleness_ends_when_the_cache_shows_our_version() -> None:
    client = RecordingClient()
    w = writer(client)
    stored = await w.write(RAYCLUSTERS, cluster({"state": "pending"}), {"state": "ready"})
    assert stored is not None
    assert not w.is_stale(stored)
    assert not w.is_stale(cluster({"state": "pending"}))  # waiting ended with the first sight


async def test_staleness_gives_up_after_the_own_write_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    client = RecordingClient()
    w = writer(client)
    old = cluster({"state": "pending"})
    await w.write(RAYCLUSTERS, old, {"state": "ready"})
    later = time.monotonic() + 60
    monkeypatch.setattr(time, "monotonic", lambda: later)
    assert not w.is_stale(old)


async def test_deferral_coalesces_writes_of_one_object_in_motion() -> None:
    client = RecordingClient()
    w = writer(client)
    obj = cluster({"state": "pending", "readyWorkerReplicas": 0})
    assert w.deferral(obj, {"state": "pending", "readyWorkerReplicas": 1}, 1.0) == 0.0
    stored = await w.write(RAYCLUSTERS, obj, {"state": "pending", "readyWorkerReplicas": 1})
    assert stored is not None
    wait = w.deferral(stored, {"state": "pending", "readyWorkerReplicas": 2}, 1.0)
    assert 0.5 < wait <= 1.0
    # An unchanged status never waits.
    assert w.deferral(stored, {"state": "pending", "readyWorkerReplicas": 1}, 1.0) == 0.0
    w.forget("u-1")
    assert w.deferral(stored, {"state": "pending", "readyWorkerReplicas": 2}, 1.0) == 0.0


async def test_apply_as_writes_by_server_side_apply_with_the_field_manager() -> None:
    client = RecordingClient()
    w = writer(client)
    w.apply_as[RAYCLUSTERS] = "kueue-admission"
    await w.write(RAYCLUSTERS, cluster({}), {"state": "ready"})
    [(verb, _path, body)] = client.requests
    assert verb == "APPLY:kueue-admission"
    assert body["status"] == {"state": "ready"}
    assert body["metadata"] == {"name": "c", "namespace": "ns", "uid": "u-1", "resourceVersion": "7"}


async def test_a_write_to_a_deleted_object_returns_none() -> None:
    w = writer(RecordingClient(gone=True))
    assert await w.write(RAYCLUSTERS, cluster({}), {"state": "ready"}) is None
    assert w.writes == 0


async def test_a_cache_newer_than_our_write_is_not_stale_even_if_our_version_was_never_seen() -> None:
    # The watch delivered our write before the PUT's answer came back (observe could not tell it
    # was ours), then a newer version: nothing more will come for our write, so nothing waits.
    client = RecordingClient()
    w = writer(client)
    stored = await w.write(RAYCLUSTERS, cluster({"state": "pending"}), {"state": "ready"})
    assert stored is not None
    newer = cluster({"state": "ready"}, version=str(int(stored["metadata"]["resourceVersion"]) + 1))
    assert not w.is_stale(newer)
    assert not w.is_stale(cluster({"state": "pending"}))  # the wait ended with the first sight


async def test_our_write_seen_by_the_watch_before_its_answer_is_read_is_not_waited_for() -> None:
    """The watch may deliver our own write before the writer reads the server's answer (both on
    one event loop). That version was seen: the next reconcile must not wait 10 s for it (a
    RayJob's submission was held up so, seen in tests/integration/faults/test_relist.py)."""
    client = RecordingClient()
    w = writer(client)
    store = client._store

    def store_and_deliver(verb: str, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        stored = store(verb, path, body)
        w.observe("RayCluster", stored, None)  # the watch event, handled while the answer is awaited
        later = {**stored, "metadata": {**stored["metadata"], "resourceVersion": str(client.version + 1)}}
        w.observe("RayCluster", later, stored)  # and a later write (a finalizer) right after it
        return stored

    client._store = store_and_deliver  # type: ignore[method-assign]
    stored = await w.write(RAYCLUSTERS, cluster({"state": "pending"}), {"state": "ready"})
    assert stored is not None
    newer = cluster({"state": "ready"}, version=str(client.version + 1))
    assert not w.is_stale(newer)
