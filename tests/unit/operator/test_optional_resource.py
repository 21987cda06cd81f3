"""An informer of an optional resource (its CRD is another project's: a JobSet) whose CRD is not
installed counts as synced and empty, so the operator starts; once the CRD is served it lists
and watches it. A resource that is not optional never syncs on a 404."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from rayquota.operator.core.cache import informer as informer_module
from rayquota.operator.core.cache.informer import Informer
from rayquota.operator.core.cache.scope import NamespaceScope
from rayquota.operator.core.resources import JOBS, JOBSETS, Resource
from rayquota.operator.kube import KubeClient, NotFound
from rayquota.operator.reachability import Reachability

JOBSET = {"metadata": {"name": "train", "namespace": "team-a", "resourceVersion": "3"}}


class CrdLaterClient:
    """LISTs answer 404 until ``install`` is called, then one JobSet; watches wait forever."""

    def __init__(self) -> None:
        self.reachability = Reachability()
        self.installed = False
        self.lists = 0

    async def list_page(self, path: str, *_args: Any, **_kwargs: Any) -> dict[str, Any]:
        self.lists += 1
        if not self.installed:
            raise NotFound(
                "GET", path, 404, '{"message": "the server could not find the requested resource"}'
            )
        return {"items": [JOBSET], "metadata": {"resourceVersion": "3"}}

    async def stream_lines(self, *_args: Any, **_kwargs: Any) -> Any:
        await asyncio.Event().wait()
        yield {}  # never reached: makes this an async generator


async def _until(condition: Any, what: str, deadline_s: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not condition():
        assert loop.time() < end, f"not within {deadline_s}s: {what}"
        await asyncio.sleep(0.01)


def _informer(client: CrdLaterClient, resource: Resource) -> Informer:
    return Informer(cast(KubeClient, client), resource, NamespaceScope.of(None))


def test_an_optional_resource_without_its_crd_syncs_empty_and_is_watched_once_installed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(informer_module, "ABSENT_RETRY_S", (0.01, 0.02))

    async def run() -> None:
        client = CrdLaterClient()
        informer = _informer(client, JOBSETS)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), 5)
            assert informer.store.list() == [] and not informer.served
            await _until(lambda: client.lists >= 2, "the LIST tried again")
            client.installed = True
            await _until(lambda: informer.store.get("team-a", "train") is not None, "the JobSet cached")
            assert informer.served
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    with caplog.at_level("INFO", logger=informer_module.__name__):
        asyncio.run(run())
    said = caplog.text
    assert "jobsets.jobset.x-k8s.io is not served (its CRD is not installed)" in said
    assert "jobsets.jobset.x-k8s.io is served now: watching it" in said


def test_a_resource_that_is_not_optional_does_not_sync_on_a_404() -> None:
    async def run() -> None:
        client = CrdLaterClient()
        informer = _informer(client, JOBS)
        task = asyncio.create_task(informer.run())
        try:
            await _until(lambda: client.lists >= 1, "the first LIST")
            await asyncio.sleep(0)  # one more turn: the 404 has been handled
            assert not informer.synced.is_set()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(run())
