"""A bounded memo: answers for keys already seen, forgetting the oldest beyond a size.

Used where a pure function of an object's version (uid, resourceVersion or generation) is asked
for on every event; the key includes that version, so an entry never answers for an old object.
`functools.lru_cache` does not fit: its key would be the whole (unhashable) object.

Thread-safe: the admission webhooks ask the same memos from their own thread
(webhooks/serving_thread.py). The value is computed outside the lock; two threads asking for
a new key at once may both compute it, and either answer is the same.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedMemo(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self.size = size
        self._values: dict[K, V] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: K, compute: Callable[[], V]) -> V:
        """The remembered value for `key`, else `compute()` remembered (first in, first out)."""
        with self._lock:
            if key in self._values:
                return self._values[key]
        value = compute()
        with self._lock:
            self._values[key] = value
            if len(self._values) > self.size:
                del self._values[next(iter(self._values))]
        return value
