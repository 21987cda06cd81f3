"""A real aiohttp server on 127.0.0.1 for tests that need something to answer HTTP (a fake Ray
dashboard, a fake API server endpoint)."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

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


class ThreadedLoopbackServer:
    """A blocking ``http.server`` handler class served on a free 127.0.0.1 port from a thread
    of its own, for tests whose fake answers are simplest written synchronously; a context
    manager that starts it and stops it (``url`` is known from construction)."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)
