"""A stop ends: a shutdown hook that never returns is left behind with a warning. (A MultiKueue
manager stopped with SIGINT in a clean-clone run logged "controllers stopped" and then waited for
ever: a worker connection's stop never returned, and the fleet's teardown timed out.)"""

from __future__ import annotations

import asyncio
import logging

import kubernetes.client
import pytest

from rayquota.operator.core import Manager, NamespaceScope
from rayquota.operator.core import manager as manager_module
from rayquota.operator.kube import KubeClient


async def test_a_stop_ends_when_a_shutdown_hook_hangs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(manager_module, "SHUTDOWN_STEP_S", 0.2)
    configuration = kubernetes.client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # never contacted: no informers
    manager = Manager(KubeClient(configuration), NamespaceScope.of(None))
    finished: list[str] = []

    async def hangs() -> None:
        await asyncio.Event().wait()

    async def after_it() -> None:
        finished.append("the next hook ran")

    manager.on_shutdown(hangs)
    manager.on_shutdown(after_it)
    stop = asyncio.Event()
    running = asyncio.create_task(manager.run(stop))
    await asyncio.wait_for(manager.ready.wait(), 10)
    caplog.set_level(logging.WARNING, "rayquota.operator.core.manager")
    stop.set()
    await asyncio.wait_for(running, 10)  # before the fix: never
    assert finished == ["the next hook ran"]
    assert any("hangs" in r.getMessage() and "did not finish" in r.getMessage() for r in caplog.records)
