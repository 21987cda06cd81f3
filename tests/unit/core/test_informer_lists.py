"""Which LIST an informer sends. The first is served by the API server's watch cache
(resourceVersion=0): a paged LIST read from etcd while Kueue's runner created 50,000 Workloads at
1,000 a second had its next pages refused (504, "Too large resource version": the cache lagged
the version of the first page), the restarted LIST likewise, and the operator never synced.
After a 410 Gone the LIST is a consistent read; refused with a 504, the next one is the cache's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

from rayquota.operator.core import resources
from rayquota.operator.core.cache.informer import Informer
from rayquota.operator.core.cache.scope import NamespaceScope
from rayquota.operator.kube import ApiError, Decode, KubeClient
from rayquota.operator.reachability import Reachability

TOO_LARGE = '{"message": "Timeout: Too large resource version: 36727, current: 12243"}'


class ScriptedClient:
    """LIST answers and watch outcomes in the order given; records each LIST's parameters."""

    def __init__(self, lists: list[Exception | None], watches: list[Exception]) -> None:
        self.lists = lists
        self.watches = watches
        self.list_params: list[dict[str, str]] = []
        self.reachability = Reachability()

    async def list_page(self, path: str, params: Mapping[str, str], decode: Decode) -> dict[str, Any]:
        self.list_params.append(dict(params))
        outcome = self.lists.pop(0) if self.lists else None
        if outcome is not None:
            raise outcome
        return {"items": [], "metadata": {"resourceVersion": "7"}}

    async def stream_lines(
        self, path: str, params: Mapping[str, str], *, read_timeout_s: float, decode: Decode
    ) -> AsyncIterator[dict[str, Any]]:
        if self.watches:
            raise self.watches.pop(0)
        yield decode(
            json.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "8"}}}).encode()
        )
        await asyncio.Event().wait()


def lists_sent(client: ScriptedClient, count: int) -> list[dict[str, str]]:
    informer = Informer(cast(KubeClient, client), resources.WORKLOADS, NamespaceScope())

    async def run() -> None:
        task = asyncio.create_task(informer.run())
        deadline = asyncio.get_running_loop().time() + 10
        while len(client.list_params) < count:
            assert asyncio.get_running_loop().time() < deadline, client.list_params
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(run())
    return client.list_params


def test_the_first_list_is_the_watch_caches_and_a_list_after_410_is_consistent() -> None:
    gone = ApiError("WATCH", "/apis/kueue.x-k8s.io/v1beta2/workloads", 410, '{"message": "too old"}')
    first, after_gone = lists_sent(ScriptedClient([], [gone]), 2)
    assert first["resourceVersion"] == "0"
    assert "resourceVersion" not in after_gone


def test_a_consistent_list_refused_for_a_lagging_cache_is_followed_by_the_caches() -> None:
    gone = ApiError("WATCH", "/apis/kueue.x-k8s.io/v1beta2/workloads", 410, '{"message": "too old"}')
    refused = ApiError("LIST", "/apis/kueue.x-k8s.io/v1beta2/workloads", 504, TOO_LARGE)
    client = ScriptedClient([None, refused], [gone])
    _, consistent, retried = lists_sent(client, 3)
    assert "resourceVersion" not in consistent
    assert retried["resourceVersion"] == "0"
