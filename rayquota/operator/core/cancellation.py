"""A task told to stop must stop, even when the cancellation was lost on the way.

On Python 3.11 a cancellation can be lost inside a request: ``asyncio.wait_for`` returns the
result when its inner call finishes as the cancellation arrives, and an HTTP client's own timeout
can turn it into a ``TimeoutError``. The task's ``cancelling()`` count still says it was told,
so the loops that retry or poll look at it and end (a MultiKueue worker connection's stop once
waited for ever on informers that went on retrying).
"""

from __future__ import annotations

import asyncio


def being_cancelled() -> bool:
    """Whether the current task was told to stop."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def stop_if_cancelled(cause: BaseException | None = None) -> None:
    """Raise CancelledError when the current task was told to stop."""
    if being_cancelled():
        raise asyncio.CancelledError from cause
