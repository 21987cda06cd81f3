"""Read-after-own-write for pods: what a reconcile created or deleted and has not seen yet.

The cache lags behind the API server by a watch event. A reconcile that ran again before
seeing its own creations would create the pods a second time; so it records them here and
makes no further pod changes for that key until the informer has observed them (or they time
out, as controller-runtime's expectations do).

A creation whose answer was lost (the API server or etcd failed after it may have stored the
object: a 5xx, a cut connection) is neither seen nor known to have failed: it stays expected
and is marked *unconfirmed* until the caller has looked it up by name (:meth:`confirmed`).
Counting it as failed would let the next reconcile create a second pod beside the first.
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
        self._unconfirmed: dict[Hashable, set[str]] = {}

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

    def creation_unconfirmed(self, key: Hashable, name: str) -> None:
        """The answer to creating ``name`` was lost: it may exist. It stays expected."""
        self._unconfirmed.setdefault(key, set()).add(name)

    def unconfirmed(self, key: Hashable) -> list[str]:
        """Creations to look up by name before the key's pods change again."""
        return sorted(self._unconfirmed.get(key, ()))

    def confirmed(self, key: Hashable, name: str, *, exists: bool) -> None:
        """The lookup's answer: a creation that does not exist failed; one that exists stays
        expected until the informer shows it."""
        names = self._unconfirmed.get(key)
        if names is not None:
            names.discard(name)
            if not names:
                del self._unconfirmed[key]
        if not exists:
            self._observe(key, name, creation=True)

    def satisfied(self, key: Hashable) -> bool:
        entry = self._pending.get(key)
        if entry is None:
            return True
        if self._clock() - entry.since > self._timeout_s:
            del self._pending[key]
            self._unconfirmed.pop(key, None)
            return True
        return False

    def forget(self, key: Hashable) -> None:
        self._pending.pop(key, None)
        self._unconfirmed.pop(key, None)

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
