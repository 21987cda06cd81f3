"""The admission webhooks are served on a thread of their own: a review is answered while the
operator's event loop is busy, the thread starts and stops with the server, a port it cannot
listen on fails it, and a new certificate reaches the handshakes."""

from __future__ import annotations

import asyncio
import datetime as dt
import http.client
import json
import socket
import ssl
import threading
import time
from types import SimpleNamespace
from typing import Any

import kubernetes.client
import pytest

from rayquota import pki
from rayquota.operator.core.cache.scope import NamespaceScope
from rayquota.operator.core.cache.store import Store
from rayquota.operator.kube import KubeClient
from rayquota.operator.webhooks import server
from rayquota.operator.webhooks.cert_keeper import ServingCertificate
from rayquota.ports import free_port

DEADLINE_S = 20.0
THREAD = "admission-webhooks"


class Pair:
    """A throw-away CA and a serving certificate for 127.0.0.1."""

    def __init__(self) -> None:
        validity = dt.timedelta(days=1)
        ca, ca_key = pki.issue_ca("test-webhook-ca", validity=validity)
        key = pki.new_key()
        leaf = pki.issue_leaf(pki.name("127.0.0.1"), key, ca, ca_key, validity=validity, hosts=("127.0.0.1",))
        self.ca = pki.cert_pem(ca).decode()
        self.cert, self.key = pki.cert_pem(leaf), pki.key_pem(key)


class FakeManager:
    def __init__(self) -> None:
        configuration = kubernetes.client.Configuration()
        configuration.host = "http://127.0.0.1:9"  # never contacted
        self.client = KubeClient(configuration)
        self.scope = NamespaceScope.of(None)

    def informer(self, resource: Any, **_: Any) -> Any:
        return SimpleNamespace(store=Store())


def a_server(serving: ServingCertificate, port: int) -> server.WebhookServer:
    objects = SimpleNamespace(api=SimpleNamespace(local_queues=None))
    return server.WebhookServer(
        FakeManager(),  # type: ignore[arg-type]
        objects,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        bind="127.0.0.1",
        port=port,
        serving=serving,
    )


def review(port: int, ca: str, uid: str = "u1") -> dict[str, Any]:
    """A ClusterQueue review, as the API server sends it (blocking: from a thread of its own)."""
    context = ssl.create_default_context(cadata=ca)
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=DEADLINE_S)
    body = {"request": {"uid": uid, "object": {"metadata": {"name": "cq"}, "spec": {}}}}
    try:
        connection.request(
            "POST", "/validate-clusterqueue", json.dumps(body), {"Content-Type": "application/json"}
        )
        answer = connection.getresponse()
        assert answer.status == 200
        return json.loads(answer.read())["response"]  # type: ignore[no-any-return]
    finally:
        connection.close()


async def until_answering(port: int, ca: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            await asyncio.to_thread(review, port, ca)
            return
        except (OSError, ssl.SSLError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


def serving_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD]


def test_a_review_is_answered_while_the_operators_loop_is_busy() -> None:
    pair, serving, port = Pair(), ServingCertificate(), free_port()
    serving.load(pair.cert, pair.key)

    async def scenario() -> tuple[bool, float]:
        task = asyncio.create_task(a_server(serving, port).run())
        try:
            await until_answering(port, pair.ca)
            answered = threading.Event()
            took: list[float] = []

            def timed_review() -> None:
                started = time.monotonic()
                assert review(port, pair.ca, uid="busy")["uid"] == "busy"
                took.append(time.monotonic() - started)
                answered.set()

            reviewer = threading.Thread(target=timed_review)
            reviewer.start()
            # A reconcile's CPU work: the operator's loop never awaits until the review is
            # answered (or 5 s pass; a server on this loop answers only after that).
            blocked_until = time.monotonic() + 5.0
            while not answered.is_set() and time.monotonic() < blocked_until:
                sum(range(10_000))
            answered_while_blocked = answered.is_set()
            await asyncio.to_thread(reviewer.join, DEADLINE_S)
            return answered_while_blocked, took[0]
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    answered_while_blocked, took = asyncio.run(scenario())
    assert answered_while_blocked
    assert took < server.SLOW_REVIEW_S


def test_the_thread_stops_with_the_server_and_the_port_closes() -> None:
    pair, serving, port = Pair(), ServingCertificate(), free_port()
    serving.load(pair.cert, pair.key)

    async def scenario() -> None:
        task = asyncio.create_task(a_server(serving, port).run())
        await until_answering(port, pair.ca)
        assert len(serving_threads()) == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert serving_threads() == []
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S).close()


def test_a_port_it_cannot_listen_on_fails_the_server() -> None:
    pair, serving = Pair(), ServingCertificate()
    serving.load(pair.cert, pair.key)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=str(port)):
            asyncio.run(asyncio.wait_for(a_server(serving, port).run(), DEADLINE_S))
    assert serving_threads() == []


def test_a_new_certificate_reaches_the_serving_threads_handshakes() -> None:
    first, second, serving, port = Pair(), Pair(), ServingCertificate(), free_port()
    serving.load(first.cert, first.key)

    async def scenario() -> None:
        task = asyncio.create_task(a_server(serving, port).run())
        try:
            await until_answering(port, first.ca)
            serving.load(second.cert, second.key)  # from the operator's loop, as the keeper does
            await until_answering(port, second.ca)
            with pytest.raises(ssl.SSLCertVerificationError):
                await asyncio.to_thread(review, port, first.ca)
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(scenario())


def test_an_event_a_review_records_is_posted_on_the_operators_loop() -> None:
    posted_on: list[str] = []
    recorder = SimpleNamespace(post=lambda *_: posted_on.append(threading.current_thread().name))

    async def scenario() -> None:
        webhooks = a_server(ServingCertificate(), free_port())
        webhooks.manager = SimpleNamespace(recorder=recorder)  # type: ignore[assignment]
        webhooks._operator_loop = asyncio.get_running_loop()
        reviewing = threading.Thread(
            target=webhooks._post_event, args=({}, "QuotaGateProtected", "kept"), name=THREAD
        )
        reviewing.start()
        await asyncio.to_thread(reviewing.join, DEADLINE_S)
        deadline = time.monotonic() + DEADLINE_S
        while not posted_on and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    asyncio.run(scenario())
    assert posted_on == [threading.main_thread().name]
