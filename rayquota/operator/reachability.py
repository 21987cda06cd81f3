"""Whether the API server answers, as the operator's own requests find it.

While the API server is down (stopped, restarting) every informer and every failing reconcile
backs off, up to 30 s for a watch and minutes for a key. When it comes back, waiting out those
backoffs would leave the operator idle for as long again (55 s after a 30 s outage, measured in
tests/integration/faults/test_apiserver_outage.py). So the client notes each request that got no
answer and each that got one; the first answer after none ends every backoff sleep at once
(`sleep`) and tells whoever asked (`on_back`: the controllers retry the keys that failed for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


class Reachability:
    def __init__(self) -> None:
        self.down = False
        self._back = asyncio.Event()
        self._callbacks: list[Callable[[], None]] = []

    def failed(self) -> None:
        """A request got no answer (connection refused or cut, timed out)."""
        if not self.down:
            self.down = True
            self._back = asyncio.Event()

    def answered(self) -> None:
        """A request got an answer, whatever its status."""
        if not self.down:
            return
        self.down = False
        self._back.set()
        log.info("the API server answers again")
        for callback in list(self._callbacks):
            try:
                callback()
            except Exception:
                log.exception("a callback for the API server's return failed")

    def on_back(self, callback: Callable[[], None]) -> None:
        """Call `callback` each time the API server answers again after it did not."""
        self._callbacks.append(callback)

    async def sleep(self, delay_s: float) -> None:
        """Sleep `delay_s` seconds, or until the API server answers again if it is down now."""
        if not self.down:
            await asyncio.sleep(delay_s)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._back.wait(), delay_s)
