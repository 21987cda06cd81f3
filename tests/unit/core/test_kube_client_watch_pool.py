"""Watches do not starve requests. Each watch holds its connection while it runs: one per kind and
watched namespace. Beside KubeRay with ten watched namespaces, rayquota held about 100 watches, and
aiohttp's default pool has 100 connections. The LIST of the next informers, and the Lease
renewals, then waited for a connection that never came ("caches not synced after 120s"). Against a
real HTTP server on loopback: 120 open watches, then a plain GET must still be answered."""

from __future__ import annotations

import asyncio
import contextlib

import kubernetes
from aiohttp import web

from rayquota.operator.kube import KubeClient

WATCHES = 120


async def _serve(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, int(port)


def test_a_request_is_answered_while_more_watches_are_open_than_a_default_pool_holds() -> None:
    async def scenario() -> None:
        opened = 0
        all_open = asyncio.Event()
        release = asyncio.Event()

        async def watch(request: web.Request) -> web.StreamResponse:
            nonlocal opened
            response = web.StreamResponse()
            await response.prepare(request)
            await response.write(b'{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "1"}}}\n')
            opened += 1
            if opened == WATCHES:
                all_open.set()
            await release.wait()
            return response

        async def namespace(request: web.Request) -> web.Response:
            return web.json_response({"metadata": {"name": request.match_info["name"]}})

        app = web.Application()
        app.router.add_get("/watch/{n}", watch)
        app.router.add_get("/api/v1/namespaces/{name}", namespace)
        runner, port = await _serve(app)
        configuration = kubernetes.client.Configuration()
        configuration.host = f"http://127.0.0.1:{port}"
        client = KubeClient(configuration)

        async def hold(n: int) -> None:
            async for _event in client.stream_lines(f"/watch/{n}", {}, read_timeout_s=60):
                await release.wait()

        watches = [asyncio.create_task(hold(n)) for n in range(WATCHES)]
        try:
            await asyncio.wait_for(all_open.wait(), 20)
            answer = await asyncio.wait_for(client.request("GET", "/api/v1/namespaces/team-a"), 10)
            assert answer == {"metadata": {"name": "team-a"}}
        finally:
            release.set()
            for task in watches:
                task.cancel()
            for task in watches:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await client.close()
            await runner.cleanup()

    asyncio.run(scenario())
