"""Which operator holds the loopback registration (unit level; the real control plane's case,
with a killed operator, is tests/e2e/test_visibility_api.py): a live holder keeps it, a dead
one's is replaced, the chart's is never touched, a stop deletes only what this process holds."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

from rayquota.operator.kube import Conflict, KubeClient
from rayquota.operator.visibility import discovery
from rayquota.operator.visibility.registration import (
    API_SERVICES,
    HOLDER_ANNOTATION,
    LoopbackApiRegistration,
    LoopbackCertificate,
    api_service,
    endpoint_answers,
)
from rayquota.operator.webhook_settings import LOOPBACK
from rayquota.ports import free_port

GROUP = discovery.of_mode("kueue")
PREFERRED = API_SERVICES.path(name=GROUP.apiservice_name("v1beta2"))


class StoredObjects:
    """The few calls the registration makes, over a dict, with resourceVersion preconditions."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.version = 0

    def _stamp(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        self.objects[path] = body
        return body

    async def get(self, path: str) -> dict[str, Any] | None:
        return self.objects.get(path)

    async def create(self, collection: str, body: dict[str, Any]) -> dict[str, Any]:
        path = f"{collection}/{body['metadata']['name']}"
        if path in self.objects:
            raise Conflict("POST", path, 409, "exists")
        return self._stamp(path, body)

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.objects[path]["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"]:
            raise Conflict("PUT", path, 409, "changed")
        return self._stamp(path, body)

    async def request(self, method: str, path: str, body: dict[str, Any]) -> None:
        assert method == "DELETE"
        if self.objects[path]["metadata"]["resourceVersion"] != body["preconditions"]["resourceVersion"]:
            raise Conflict(method, path, 409, "changed")
        del self.objects[path]

    async def list_items(self, path: str) -> list[dict[str, Any]]:
        return [body for key, body in self.objects.items() if key.startswith(path + "/")]


def _operator(store: StoredObjects, holder: str, live_ports: set[int]) -> LoopbackApiRegistration:
    async def answers(port: int, ca_bundle: str) -> bool:
        return port in live_ports

    return LoopbackApiRegistration(cast(KubeClient, store), GROUP, "Y2E=", holder=holder, answers=answers)


def _holder(store: StoredObjects, path: str = PREFERRED) -> str | None:
    body = store.objects.get(path)
    return None if body is None else body["metadata"]["annotations"][HOLDER_ANNOTATION]


def test_a_live_holder_keeps_it_and_a_dead_ones_is_replaced() -> None:
    store, live = StoredObjects(), {1001, 1002}
    first, second = _operator(store, "op-a", live), _operator(store, "op-b", live)
    assert asyncio.run(first.claim(1001))
    assert not asyncio.run(second.claim(1002))
    assert _holder(store) == "op-a"
    live.discard(1001)  # op-a killed: nothing answers at its port
    assert asyncio.run(second.claim(1002))
    older = API_SERVICES.path(name=GROUP.apiservice_name("v1beta1"))
    assert _holder(store) == _holder(store, older) == "op-b"
    assert store.objects[PREFERRED]["spec"]["service"]["port"] == 1002


def test_a_stop_deletes_only_what_this_process_holds() -> None:
    store, live = StoredObjects(), {1001, 1002}
    first, second = _operator(store, "op-a", live), _operator(store, "op-b", live)
    asyncio.run(first.claim(1001))
    asyncio.run(second.claim(1002))
    asyncio.run(second.unregister())
    assert _holder(store) == "op-a" and any("services" in path for path in store.objects)
    asyncio.run(first.unregister())
    assert not [path for path in store.objects if "apiservices" in path or "/services/" in path]


def test_the_charts_apiservice_is_never_taken() -> None:
    store = StoredObjects()
    chart = api_service(GROUP, "v1beta2", 443, "Y2E=", "chart")
    chart["spec"]["service"] = {"name": "rayquota", "namespace": "rayquota-system", "port": 443}
    asyncio.run(store.create(API_SERVICES.path(), chart))
    assert not asyncio.run(_operator(store, "op-a", set()).claim(1001))
    assert store.objects[PREFERRED]["spec"]["service"]["name"] == "rayquota"


def _serve_until_done(context: ssl.SSLContext | None, checks: Callable[[int], Awaitable[None]]) -> None:
    async def run() -> None:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        server = await asyncio.start_server(accept, LOOPBACK, 0, ssl=context)
        try:
            await checks(server.sockets[0].getsockname()[1])
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(run())


def _tls(certificate: LoopbackCertificate, folder: Path) -> ssl.SSLContext:
    (folder / "cert.pem").write_bytes(certificate.cert)
    (folder / "key.pem").write_bytes(certificate.key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    return context


def test_the_holder_is_alive_only_while_its_own_certificate_answers_at_its_port(tmp_path: Path) -> None:
    """A port now served by someone else (a plain listener, or another operator with its own CA)
    does not keep a dead holder's registration; the holder's own endpoint does."""
    holder, other = LoopbackCertificate.issue(), LoopbackCertificate.issue()

    async def the_holder(port: int) -> None:
        assert await endpoint_answers(port, holder.ca_bundle)
        assert not await endpoint_answers(port, other.ca_bundle)

    async def a_plain_listener(port: int) -> None:
        assert not await endpoint_answers(port, holder.ca_bundle)

    _serve_until_done(_tls(holder, tmp_path), the_holder)
    _serve_until_done(None, a_plain_listener)
    assert not asyncio.run(endpoint_answers(free_port(), holder.ca_bundle))  # nothing there
