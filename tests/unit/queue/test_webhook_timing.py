"""The webhook server answers within the API server's wait, and says when a review was slow."""

from __future__ import annotations

import asyncio
import logging
import re
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from rayquota.operator.webhooks import server
from rayquota.operator.webhooks.configurations import TIMEOUT_SECONDS


class SilentApiServer:
    """A client whose requests never answer (an API server too busy to)."""

    def __init__(self) -> None:
        self.asked = 0

    async def request(self, method: str, path: str, **_: Any) -> Any:
        self.asked += 1
        await asyncio.Event().wait()


def a_server_missing_the_queue(client: SilentApiServer) -> Any:
    """What ``_local_queue_exists`` reads of its server: a cache without the LocalQueue."""
    resource = SimpleNamespace(path=lambda namespace: f"/apis/x/namespaces/{namespace}/localqueues")
    return SimpleNamespace(
        objects=SimpleNamespace(api=SimpleNamespace(local_queues=resource)),
        local_queues=SimpleNamespace(store=SimpleNamespace(get=lambda namespace, name: None)),
        lookup_client=client,
    )


def test_a_lookup_the_api_server_does_not_answer_ends_in_time_taking_the_queue_to_exist(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(server, "LOOKUP_TIMEOUT_S", 0.05)
    client = SilentApiServer()
    lookup = server.WebhookServer._local_queue_exists(a_server_missing_the_queue(client), "users", "team")
    # Without its own bound the lookup waits as long as the client would (30 s, three times).
    assert asyncio.run(asyncio.wait_for(lookup, 5)) is True
    assert client.asked == 1
    assert "LocalQueue users/team: not in the cache" in caplog.text


def test_a_slow_review_is_logged_with_its_path_and_time(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(0.1)
        return web.json_response({})

    async def fast(request: web.Request) -> web.Response:
        return web.json_response({})

    async def review(path: str) -> int:
        app = web.Application(middlewares=[server._timed])
        app.add_routes([web.post("/slow", slow), web.post("/fast", fast)])
        async with TestClient(TestServer(app)) as client:
            answer = await client.post(path, json={})
            return answer.status

    # The bound is set per phase, far from what a loaded machine adds to a review's own time:
    # a fast review stays under 5 s, a review that sleeps 0.1 s is over 0.05 s.
    with caplog.at_level(logging.WARNING, logger=server.__name__):
        monkeypatch.setattr(server, "SLOW_REVIEW_S", 5.0)
        assert asyncio.run(review("/fast")) == 200
        assert "admission review" not in caplog.text
        monkeypatch.setattr(server, "SLOW_REVIEW_S", 0.05)
        assert asyncio.run(review("/slow")) == 200
    took = re.search(
        rf"admission review /slow took (\d+\.\d)s \(the API server waits {TIMEOUT_SECONDS}s\)", caplog.text
    )
    assert took is not None, caplog.text
    assert float(took.group(1)) >= 0.1
