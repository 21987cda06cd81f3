"""Dashboard name lookups: a slow or failing name never holds its caller beyond the timeout."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest
from aiohttp.abc import ResolveResult

from rayquota.operator.ray.dashboard_api.dashboard_dns import BoundedWaitResolver
from tests.polling import wait_for_async


class Names:
    """A resolver's answers: names in `known` resolve, others fail; `held` names wait until released."""

    def __init__(self) -> None:
        self.known = {"head-svc.ns.svc": "10.0.0.7"}
        self.held: set[str] = set()
        self.release = threading.Event()
        self.lookups: list[str] = []

    def lookup(self, host: str, port: int, family: int) -> list[ResolveResult]:
        self.lookups.append(host)
        if host in self.held:
            self.release.wait(30)
        if host not in self.known:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        address = self.known[host]
        return [ResolveResult(hostname=host, host=address, port=port, family=family, proto=6, flags=0)]


async def test_a_name_is_looked_up_once_and_then_answered_from_memory() -> None:
    names = Names()
    resolver = BoundedWaitResolver(lookup=names.lookup)
    try:
        first = await resolver.resolve("head-svc.ns.svc", 8265)
        again = await resolver.resolve("head-svc.ns.svc", 8265)
    finally:
        await resolver.close()
    assert first[0]["host"] == again[0]["host"] == "10.0.0.7"
    assert names.lookups == ["head-svc.ns.svc"]


async def test_a_failed_name_fails_at_once_until_its_negative_entry_expires() -> None:
    names = Names()
    now = [100.0]
    resolver = BoundedWaitResolver(lookup=names.lookup, negative_ttl_s=5.0, clock=lambda: now[0])
    try:
        with pytest.raises(socket.gaierror):
            await resolver.resolve("gone-head-svc.ns.svc", 8265)
        with pytest.raises(socket.gaierror):
            await resolver.resolve("gone-head-svc.ns.svc", 8265)
        assert names.lookups == ["gone-head-svc.ns.svc"]
        now[0] += 5.1
        with pytest.raises(socket.gaierror):
            await resolver.resolve("gone-head-svc.ns.svc", 8265)
        assert names.lookups == ["gone-head-svc.ns.svc"] * 2
    finally:
        await resolver.close()


async def test_a_slow_lookup_holds_its_caller_only_for_the_timeout_and_then_fills_the_memory() -> None:
    names = Names()
    names.held.add("head-svc.ns.svc")
    resolver = BoundedWaitResolver(lookup=names.lookup, timeout_s=0.2)
    try:
        started = time.monotonic()
        with pytest.raises(socket.gaierror, match=r"took over 0\.2s"):
            await resolver.resolve("head-svc.ns.svc", 8265)
        assert time.monotonic() - started < 2.0
        # While the lookup goes on, the name fails at once, with no second lookup.
        started = time.monotonic()
        with pytest.raises(socket.gaierror):
            await resolver.resolve("head-svc.ns.svc", 8265)
        assert time.monotonic() - started < 0.1
        assert names.lookups == ["head-svc.ns.svc"]
        names.release.set()

        async def resolved() -> bool:
            try:
                return bool(await resolver.resolve("head-svc.ns.svc", 8265))
            except socket.gaierror:
                return False

        await wait_for_async("the late answer in the memory", resolved, timeout_s=10, interval_s=0.02)
        assert names.lookups == ["head-svc.ns.svc"]
    finally:
        names.release.set()
        await resolver.close()


async def test_callers_of_one_name_share_its_lookup() -> None:
    names = Names()
    names.held.add("head-svc.ns.svc")
    resolver = BoundedWaitResolver(lookup=names.lookup, timeout_s=10)
    try:
        callers = [asyncio.ensure_future(resolver.resolve("head-svc.ns.svc", 8265)) for _ in range(5)]
        names.release.set()
        answers = await asyncio.gather(*callers)
    finally:
        names.release.set()
        await resolver.close()
    assert all(a[0]["host"] == "10.0.0.7" for a in answers)
    assert names.lookups == ["head-svc.ns.svc"]
