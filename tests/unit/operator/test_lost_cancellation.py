"""A task told to stop stops, even when its request turned the cancellation into a timeout.

An HTTP client whose own timeout meets the cancellation can raise TimeoutError instead of
CancelledError (Python 3.11). An informer retried on it with backoff and never ended: a
MultiKueue manager stopped with SIGINT logged "controllers stopped" and waited for ever on a
worker connection's informers (clean-clone run cc11)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

from rayquota.operator.core.cache.informer import Informer
from rayquota.operator.core.cache.scope import NamespaceScope
from rayquota.operator.core.cancellation import being_cancelled, stop_if_cancelled
from rayquota.operator.core.resources import PODS
from rayquota.operator.kube import KubeClient
from rayquota.operator.reachability import Reachability


class TimingOutClient:
    """Every LIST hangs; cancelled, it says TimeoutError, as a client's own timeout can."""

    def __init__(self) -> None:
        self.reachability = Reachability()
        self.calls = 0
        self.started = asyncio.Event()
        self.swallows = True

    async def list_page(self, *_args: Any, **_kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        self.started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            if not self.swallows:
                raise
            raise TimeoutError("the request's own timeout") from None
        return {}


def test_an_informer_told_to_stop_while_its_request_times_out_stops() -> None:
    async def run() -> None:
        client = TimingOutClient()
        informer = Informer(cast(KubeClient, client), PODS, NamespaceScope.of(None))
        task = asyncio.create_task(informer.run())
        await asyncio.wait_for(client.started.wait(), 5)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=5)
        if not done:  # let it go, so the failure is reported rather than the test hanging
            client.swallows = False
            task.cancel()
            await asyncio.wait({task}, timeout=5)
        assert done, f"the informer did not stop (LIST tried {client.calls} times)"
        assert task.cancelled()

    asyncio.run(run())


def test_being_cancelled_follows_the_tasks_cancellation_count() -> None:
    async def run() -> None:
        seen: list[bool] = []

        async def body() -> None:
            seen.append(being_cancelled())
            with contextlib.suppress(asyncio.CancelledError):  # swallowed, as a lost one is
                await asyncio.sleep(3600)
            seen.append(being_cancelled())
            stop_if_cancelled()

        task = asyncio.create_task(body())
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.wait({task}, timeout=5)
        assert seen == [False, True] and task.cancelled()

    asyncio.run(run())
