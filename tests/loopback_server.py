"""A real aiohttp server on 127.0.0.1 for tests that need something to answer HTTP (a fake Ray
dashboard, a fake API server endpoint)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web


@asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[int]:
    """Serve `app` on a free loopback port; yields the port."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        server = site._server
        assert server is not None and server.sockets
        yield int(server.sockets[0].getsockname()[1])
    finally:
        await runner.cleanup()
