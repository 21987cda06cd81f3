"""An aiohttp application served on a thread of its own, with its own event loop.

The admission webhooks answer the API server, which gives up after ``timeoutSeconds`` (10 s)
and, with ``failurePolicy: Fail``, refuses the request it was reviewing. On the operator's event
loop a review waited behind every reconcile (17.9 s measured under load); on a loop of its own
it waits only for the CPU. The thread's loop owns the listening socket, the TLS handshakes
(with the certificate's one context, `cert_keeper.ServingCertificate`) and every connection.

The operator's loop starts it (:meth:`ServingThread.start`: returns once the port listens, or
raises why it could not), watches it (:meth:`ended`: a thread that ends by itself is the
operator's failure) and stops it (:meth:`stop`: the port closed and the thread joined).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Callable

from aiohttp import web

from rayquota.operator.webhooks.cert_keeper import ServingCertificate

log = logging.getLogger(__name__)

# How long a stop waits for reviews in flight (each is bounded well below this), then for the
# thread to end.
DRAIN_S = 3.0
JOIN_S = 10.0


class ServingThread:
    def __init__(
        self,
        make_app: Callable[[], web.Application],
        *,
        bind: str,
        port: int,
        serving: ServingCertificate,
        name: str,
    ) -> None:
        """``make_app`` is called on the thread: the application belongs to its loop."""
        self.make_app = make_app
        self.bind = bind
        self.port = port
        self.serving = serving
        self.name = name
        self._thread: threading.Thread | None = None
        self._listening: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._stopping: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._ended: concurrent.futures.Future[None] = concurrent.futures.Future()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    async def start(self) -> None:
        """Start the thread; return once the port listens, or raise why it does not."""
        if self._thread is not None:
            raise RuntimeError(f"{self.name}: a serving thread runs once")
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        try:
            await asyncio.shield(asyncio.wrap_future(self._listening))
        except BaseException:
            await self.stop()
            raise

    async def ended(self) -> None:
        """Wait while the thread serves; it ends only when stopped, or when it fails (raised)."""
        await asyncio.shield(asyncio.wrap_future(self._ended))
        if not self._stopping.done():
            raise RuntimeError(f"{self.name}: the serving thread ended by itself")

    async def stop(self) -> None:
        """Close the port and join the thread (bounded: a stuck thread is left, said in the log)."""
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            self._stopping.set_result(None)
        thread = self._thread
        if thread is None:
            return
        await asyncio.to_thread(thread.join, JOIN_S)
        if thread.is_alive():
            log.warning("%s: the serving thread did not end within %.0fs", self.name, JOIN_S)

    # --- on the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:
            for outcome in (self._listening, self._ended):
                with contextlib.suppress(concurrent.futures.InvalidStateError):
                    outcome.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                self._ended.set_result(None)

    async def _serve(self) -> None:
        runner = web.AppRunner(self.make_app(), access_log=None, shutdown_timeout=DRAIN_S)
        await runner.setup()
        self.serving.served_from(asyncio.get_running_loop())
        try:
            site = web.TCPSite(runner, self.bind, self.port, ssl_context=self.serving.context)
            await site.start()
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                self._listening.set_result(None)
            await asyncio.wrap_future(self._stopping)
        finally:
            self.serving.served_from(None)
            await runner.cleanup()
