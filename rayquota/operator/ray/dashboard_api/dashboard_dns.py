"""Name lookups for Ray dashboards that never keep a caller waiting long.

A dashboard's address is its head Service's DNS name (`<cluster>-head-svc.<ns>.svc...`). The
system resolver answers from a thread, and for a name that does not exist (a head not created
yet, or already deleted) it sometimes takes 5 s on this machine, where one at a time takes 3 ms.
aiohttp caches names that resolve, but not names that fail, and a caller waits for as long as the
lookup takes. So here:

- one lookup per name at a time, on a few threads of its own (the event loop's default executor
  stays free for everything else);
- a caller waits at most `timeout_s`; a lookup that outlasts it goes on in the background, and
  until it ends the name fails at once;
- a failed name fails at once for `negative_ttl_s`, a resolved one is answered from memory for
  `ttl_s`.

Hand-written rather than aiodns (c-ares), which would add a compiled dependency to the lock for
the one behaviour needed here: answers and failures remembered, and a bound on the wait.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from aiohttp.abc import AbstractResolver, ResolveResult

_NUMERIC = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
_PRUNE_ABOVE = 1024  # names remembered before the expired ones are dropped (heads come and go)

Lookup = Callable[[str, int, int], list[ResolveResult]]
_Name = tuple[str, int, int]  # host, port, family


def system_lookup(host: str, port: int, family: int) -> list[ResolveResult]:
    """The system resolver (blocking): what aiohttp's threaded resolver asks."""
    infos = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM, 0, socket.AI_ADDRCONFIG)
    return [
        ResolveResult(
            hostname=host,
            host=str(address[0]),
            port=int(address[1]),
            family=found,
            proto=proto,
            flags=_NUMERIC,
        )
        for found, _, proto, _, address in infos
    ]


@dataclass(frozen=True)
class _Remembered:
    until: float
    hosts: list[ResolveResult] | None = None
    error: OSError | None = None


class BoundedWaitResolver(AbstractResolver):
    def __init__(
        self,
        *,
        timeout_s: float = 1.0,
        ttl_s: float = 10.0,
        negative_ttl_s: float = 5.0,
        threads: int = 4,
        lookup: Lookup = system_lookup,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout_s = timeout_s
        self.ttl_s = ttl_s
        self.negative_ttl_s = negative_ttl_s
        self._lookup = lookup
        self._clock = clock
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dashboard-dns")
        self._remembered: dict[_Name, _Remembered] = {}
        self._in_flight: dict[_Name, asyncio.Future[list[ResolveResult]]] = {}

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        name: _Name = (host, port, int(family))
        remembered = self._remembered.get(name)
        if remembered is not None and remembered.until > self._clock():
            if remembered.error is not None:
                raise remembered.error
            return list(remembered.hosts or [])
        lookup = self._in_flight.get(name)
        if lookup is None:
            lookup = self._start(name)
        try:
            return list(await asyncio.wait_for(asyncio.shield(lookup), self.timeout_s))
        except TimeoutError:
            error = socket.gaierror(
                socket.EAI_AGAIN, f"the lookup of {host} took over {self.timeout_s:g}s (still running)"
            )
            if name in self._in_flight:  # fail at once until the lookup ends
                self._remembered[name] = _Remembered(until=float("inf"), error=error)
            raise error from None

    def _start(self, name: _Name) -> asyncio.Future[list[ResolveResult]]:
        loop = asyncio.get_running_loop()
        lookup = loop.run_in_executor(self._executor, functools.partial(self._lookup, *name))
        self._in_flight[name] = lookup
        lookup.add_done_callback(functools.partial(self._ended, name))
        return lookup

    def _ended(self, name: _Name, lookup: asyncio.Future[list[ResolveResult]]) -> None:
        self._in_flight.pop(name, None)
        if lookup.cancelled():
            self._remembered.pop(name, None)
            return
        error = lookup.exception()
        now = self._clock()
        if error is None:
            self._remembered[name] = _Remembered(until=now + self.ttl_s, hosts=lookup.result())
        elif isinstance(error, OSError):
            self._remembered[name] = _Remembered(until=now + self.negative_ttl_s, error=error)
        else:
            self._remembered.pop(name, None)
        if len(self._remembered) > _PRUNE_ABOVE:
            self._remembered = {k: v for k, v in self._remembered.items() if v.until > now}

    async def close(self) -> None:
        for lookup in self._in_flight.values():
            lookup.cancel()
        self._in_flight.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)
