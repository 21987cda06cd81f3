"""Which namespaces the operator watches: all, a fixed list, or glob patterns."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

_GLOB_CHARS = "*?[!"


@dataclass(frozen=True)
class NamespaceScope:
    patterns: tuple[str, ...] = ()

    @classmethod
    def of(cls, patterns: Sequence[str] | None) -> NamespaceScope:
        return cls(tuple(patterns or ()))

    @property
    def cluster_wide(self) -> bool:
        return not self.patterns

    @property
    def has_globs(self) -> bool:
        return any(ch in p for p in self.patterns for ch in _GLOB_CHARS)

    def watch_targets(self, namespaced: bool) -> list[str | None]:
        """One watch per plain namespace; one cluster-wide watch for globs or no patterns."""
        if not namespaced or self.cluster_wide or self.has_globs:
            return [None]
        targets: list[str | None] = [*sorted(set(self.patterns))]
        return targets

    def admits(self, namespace: str | None) -> bool:
        if self.cluster_wide or not namespace:
            return True
        return any(fnmatch.fnmatchcase(namespace, p) for p in self.patterns)
