"""The operator (rayquota.app.main.run) in a background thread, for integration tests."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from rayquota.operator.config import OperatorConfig
from rayquota.operator.ray.raycronjob.clock import Clock


@contextlib.contextmanager
def operator_thread(
    config: OperatorConfig, namespace_patterns: list[str], *, clock: Clock | None = None
) -> Iterator[None]:
    """Run the operator scoped to `namespace_patterns` until the block ends; fails if it does not
    get ready (caches synced) within 60 s or does not stop within 60 s. `clock`: the RayCronJob
    controller's (tests move it)."""
    from rayquota.app import main

    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=main.run,
        kwargs={
            "namespaces": namespace_patterns,
            "metrics_port": 0,
            "health_port": 0,
            "verbose": False,
            "stop_flag": stop,
            "ready_flag": ready,
            "config": config,
            "clock": clock,
        },
        name="rayquota-operator",
        daemon=True,
    )
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not ready.wait(timeout=0.1):
            assert thread.is_alive(), "the operator thread exited during start-up"
            assert time.monotonic() < deadline, "the operator did not start in 60s"
        yield
    finally:
        stop.set()
        thread.join(timeout=60)
        assert not thread.is_alive(), "the operator did not stop within 60s"
