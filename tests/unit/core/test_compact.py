"""Cached objects in less memory: interned decoding and shared subtrees change no value."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

from rayquota.operator.core import Informer, NamespaceScope, resources
from rayquota.operator.core.cache.compact import Compactor
from rayquota.operator.kube import Decode, KubeClient, decode_json

WORKLOAD = {
    "metadata": {"name": "w", "namespace": "ns", "uid": "6a1f-0001", "resourceVersion": "12"},
    "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "1"}}]},
    "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main"}]}},
}
PATHS = (("spec",), ("status", "admission"))


def decoded(obj: Mapping[str, Any]) -> dict[str, Any]:
    return cast(dict[str, Any], decode_json(json.dumps(obj)))


def renamed(obj: Mapping[str, Any], name: str, uid: str) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "name": name, "uid": uid}}


def test_decoding_interns_keys_and_short_values_but_not_uids() -> None:
    first, second = decoded(WORKLOAD), decoded(WORKLOAD)
    assert first == json.loads(json.dumps(WORKLOAD))
    key_of = {id(k) for k in first["metadata"]}
    assert all(id(k) in key_of for k in second["metadata"])
    assert first["spec"]["queueName"] is second["spec"]["queueName"]
    assert first["metadata"]["uid"] == second["metadata"]["uid"]
    assert first["metadata"]["uid"] is not second["metadata"]["uid"]
    long_value = "x" * 200
    assert decoded({"m": long_value})["m"] is not decoded({"m": long_value})["m"]


def test_equal_subtrees_at_shared_paths_are_cached_once() -> None:
    compact = Compactor(PATHS)
    a = compact(decoded(renamed(WORKLOAD, "a", "1")))
    b = compact(decoded(renamed(WORKLOAD, "b", "2")))
    assert a == renamed(WORKLOAD, "a", "1") and b == renamed(WORKLOAD, "b", "2")
    assert a["spec"] is b["spec"]
    assert a["status"]["admission"] is b["status"]["admission"]
    assert a["metadata"] is not b["metadata"]
    assert list(a) == list(WORKLOAD) and list(a["status"]) == ["admission"]


def test_subtrees_equal_in_python_but_not_in_json_are_not_shared() -> None:
    compact = Compactor(PATHS)
    whole = compact(decoded({**WORKLOAD, "spec": {"count": 1}}))
    fraction = compact(decoded({**WORKLOAD, "spec": {"count": 1.0}}))
    assert type(whole["spec"]["count"]) is int and type(fraction["spec"]["count"]) is float


def test_the_table_forgets_subtrees_no_object_holds() -> None:
    compact = Compactor(PATHS)
    kept = [compact(decoded({**WORKLOAD, "spec": {"i": i}})) for i in range(3)]
    for i in range(3, 10):
        compact(decoded({**WORKLOAD, "spec": {"i": i}}))
    compact.sweep()
    assert len(compact) == 3 + 1  # three specs still cached, and the one admission
    assert kept[0]["spec"] == {"i": 0}


class OneEventClient:
    """A client whose LIST is empty and whose watch delivers the given objects as ADDED."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects

    async def list_page(self, path: str, params: Mapping[str, str], decode: Decode) -> dict[str, Any]:
        return {"items": [], "metadata": {"resourceVersion": "1"}}

    async def stream_lines(
        self, path: str, params: Mapping[str, str], *, read_timeout_s: float, decode: Decode
    ) -> AsyncIterator[dict[str, Any]]:
        for obj in self.objects:
            yield decode(json.dumps({"type": "ADDED", "object": obj}).encode())
        await asyncio.Event().wait()


def test_the_informer_caches_workloads_with_shared_specs() -> None:
    objects = [renamed(WORKLOAD, f"w{i}", str(i)) for i in range(3)]
    client = OneEventClient(objects)
    informer = Informer(
        cast(KubeClient, client), resources.WORKLOADS, NamespaceScope(), shared_paths=PATHS, interned=True
    )

    async def run() -> None:
        task = asyncio.create_task(informer.run())
        for _ in range(100):
            await asyncio.sleep(0)
            if len(informer.store) == 3:
                break
        task.cancel()

    asyncio.run(run())
    cached = [informer.store.get("ns", f"w{i}") for i in range(3)]
    assert cached == objects
    assert cached[0] is not None and cached[1] is not None
    assert cached[0]["spec"] is cached[1]["spec"]
    assert next(iter(cached[0]["metadata"])) is next(iter(cached[1]["metadata"]))  # interned keys
