"""An API server that does not answer (stopped, restarting) is a transient condition: the queue's
status writer carries on (it once ended the whole operator 2 s into an API server outage:
tests/integration/faults/test_apiserver_outage.py), and a reconcile that fails for it is retried
with a warning, without a traceback."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest

from rayquota.operator.core.controller import Controller
from rayquota.operator.core.resources import ObjectKey
from rayquota.operator.kube import ApiError, NotFound
from rayquota.operator.queue import status as queue_status
from rayquota.operator.ray.raycluster.reconciler import ReconcileFailed
from rayquota.operator.reachability import Reachability


async def test_the_queue_status_writer_outlives_an_api_server_outage(monkeypatch: pytest.MonkeyPatch) -> None:
    writer = queue_status.QueueStatusWriter.__new__(queue_status.QueueStatusWriter)
    calls = 0

    async def write_all() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise aiohttp.ClientConnectionError("Cannot connect to host 127.0.0.1:6443")
        if calls == 2:
            raise TimeoutError()
        raise asyncio.CancelledError  # the operator stopping

    monkeypatch.setattr(writer, "write_all", write_all)
    monkeypatch.setattr(queue_status, "STATUS_PERIOD_S", 0.0)
    with pytest.raises(asyncio.CancelledError):
        await writer.run()
    assert calls == 3


STARTING = '{"message": "the request has been made before all known HTTP paths have been installed"}'
ENDING = (
    '{"message": "pods \\"x\\" is forbidden: unable to create new content in namespace ns '
    'because it is being terminated"}'
)


@pytest.mark.parametrize(
    ("failure", "words"),
    [
        # No answer at all (stopped, restarting).
        (
            aiohttp.ClientConnectionError("Cannot connect to host 127.0.0.1:6443"),
            "no answer from the API server",
        ),
        # Right after a (re)start it answers 503 until every path is installed (the
        # API-server-outage fault test logged a traceback for a finalizer PATCH refused so).
        (
            ApiError("PATCH", "/apis/ray.io/v1/namespaces/ns/rayjobs/a", 503, STARTING),
            "the API server is not ready",
        ),
        # A create in a namespace that is being deleted.
        (ApiError("POST", "/api/v1/namespaces/ns/pods", 403, ENDING), "its namespace is being deleted"),
        # A failure the reconciler wrote on the object already (the RayCluster planner's failed
        # creations: a fuzz run saw its traceback logged as an error).
        (ReconcileFailed("pod x: 403 exceeded quota"), "reported on the object"),
        # The object deleted between the cache's read and a write (a finalizer PATCH in the etcd
        # fault test: its traceback failed the test's check of the operator's log).
        (
            NotFound("PATCH", "/apis/ray.io/v1/namespaces/ns/rayjobs/a", 404, '{"reason": "NotFound"}'),
            "an object is gone",
        ),
    ],
    ids=["unreachable", "starting", "namespace-ending", "reported", "gone"],
)
async def test_a_reconcile_failing_for_a_passing_condition_is_retried_with_a_warning_and_no_traceback(
    caplog: pytest.LogCaptureFixture, failure: Exception, words: str
) -> None:
    async def failing(key: ObjectKey) -> None:
        raise failure

    caplog.set_level(logging.WARNING, "rayquota.operator.core.controller")
    await Controller("rayjob", failing)._reconcile_one(ObjectKey("ns", "a"))
    [record] = caplog.records
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert words in record.getMessage()


@pytest.mark.parametrize(
    "failure",
    [
        ValueError("a bug"),
        ApiError("PATCH", "/apis/ray.io/v1/namespaces/ns/rayjobs/b", 422, '{"message": "invalid"}'),
    ],
    ids=["bug", "refused-on-its-merits"],
)
async def test_any_other_reconcile_failure_is_an_error_with_its_traceback(
    caplog: pytest.LogCaptureFixture, failure: Exception
) -> None:
    async def failing(key: ObjectKey) -> None:
        raise failure

    caplog.set_level(logging.WARNING, "rayquota.operator.core.controller")
    await Controller("rayjob", failing)._reconcile_one(ObjectKey("ns", "b"))
    [record] = caplog.records
    assert record.levelno == logging.ERROR and record.exc_info is not None


async def test_a_backoff_sleep_ends_when_the_api_server_answers_again() -> None:
    reachability = Reachability()
    back: list[str] = []
    reachability.on_back(lambda: back.append("back"))
    reachability.failed()
    sleeping = asyncio.create_task(reachability.sleep(30))
    await asyncio.sleep(0.05)
    assert not sleeping.done()
    reachability.answered()
    await asyncio.wait_for(sleeping, 1)  # not 30 s
    reachability.answered()  # answering while up is no news
    assert back == ["back"]
    # While the server answers, a backoff is slept in full (a 500 is not an outage).
    started = asyncio.get_running_loop().time()
    await reachability.sleep(0.2)
    assert asyncio.get_running_loop().time() - started >= 0.19


async def test_keys_that_failed_for_an_unanswering_api_server_are_retried_when_it_answers() -> None:
    async def unreachable(key: ObjectKey) -> None:
        raise aiohttp.ClientConnectionError("Cannot connect to host 127.0.0.1:6443")

    controller = Controller("rayjob", unreachable)
    for name in ("a", "b"):
        key = ObjectKey("ns", name)
        controller.queue.add(key)
        taken = await controller.queue.get()
        await controller._reconcile_one(taken)
        controller.queue.done(taken)
    assert len(controller.queue) == 0  # both wait out their backoff
    controller.retry_unanswered()
    assert len(controller.queue) == 2
    # The outage's failures are forgotten: a failure now (a 503 while the server starts) is
    # retried after the first backoff step, not the one the outage had reached.
    assert controller.queue.failures(ObjectKey("ns", "a")) == 0
    controller.queue.shut_down()
