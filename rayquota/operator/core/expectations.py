"""Read-after-own-write for pods: what a reconcile created or deleted and has not seen yet.

The cache lags behind the API server by a watch event. A reconcile that ran again before
seeing its own creations would create the pods a second time; so it records them here and
makes no further pod changes for that key until the informer has observed them (or they time
out, as controller-runtime's expectations do).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

EXPECTATIONS_TIMEOUT_S = 300.0


@dataclass
class _Pending:
    creations: set[str] = field(default_factory=set)
    deletions: set[str] = field(default_factory=set)
    since: float = 0.0


class Expectations:
    def __init__(
        self, clock: Callable[[], float] = time.monotonic, timeout_s: float = EXPECTATIONS_TIMEOUT_S
    ):
        self._clock = clock
        self._timeout_s = timeout_s
        self._pending: dict[Hashable, _Pending] = {}

    def expect_creations(self, key: Hashable, names: Iterable[str]) -> None:
        names = list(names)
        if names:
            self._entry(key).creations.update(names)

    def expect_deletions(self, key: Hashable, names: Iterable[str]) -> None:
        names = list(names)
        if names:
            self._entry(key).deletions.update(names)

    def creation_failed(self, key: Hashable, name: str) -> None:
        self._observe(key, name, creation=True)

    def deletion_failed(self, key: Hashable, name: str) -> None:
        self._observe(key, name, creation=False)

    def observed_created(self, key: Hashable, name: str) -> None:
        self._observe(key, name, creation=True)

    def observed_deleted(self, key: Hashable, name: str) -> None:
        self._observe(key, name, creation=False)

    def satisfied(self, key: Hashable) -> bool:
        entry = self._pending.get(key)
        if entry is None:
            return True
        if self._clock() - entry.since > self._timeout_s:
            del self._pending[key]
            return True
        return False

    def forget(self, key: Hashable) -> None:
        self._pending.pop(key, None)

    def _entry(self, key: Hashable) -> _Pending:
        entry = self._pending.get(key)
        if entry is None:
            entry = self._pending[key] = _Pending(since=self._clock())
        else:
            entry.since = self._clock()
        return entry

    def _observe(self, key: Hashable, name: str, *, creation: bool) -> None:
        entry = self._pending.get(key)
        if entry is None:
            return
        (entry.creations if creation else entry.deletions).discard(name)
        if not entry.creations and not entry.deletions:
            del self._pending[key]
