"""A bounded memo: answers for keys already seen, forgetting the oldest beyond a size.

Used where a pure function of an object's version (uid, resourceVersion or generation) is asked
for on every event; the key includes that version, so an entry never answers for an old object.
`functools.lru_cache` does not fit: its key would be the whole (unhashable) object.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedMemo(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self.size = size
        self._values: dict[K, V] = {}

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: K, compute: Callable[[], V]) -> V:
        """The remembered value for `key`, else `compute()` remembered (first in, first out)."""
        if key in self._values:
            return self._values[key]
        value = self._values[key] = compute()
        if len(self._values) > self.size:
            del self._values[next(iter(self._values))]
        return value
