"""Equal subtrees of cached objects, cached once.

At Kueue's large scale (50,000 Workloads) every Workload held a ``spec`` tree of its own, though
there are only as many different specs as workload shapes times queues, and an admission of its
own, though there are as many different ones as shapes times ClusterQueues: dicts of a few keys
cost about 200 bytes each, and those two subtrees were half of a Workload's 8 KB. (The other
half, a new string for every key of every object, the client's decoder saves by interning keys
and short values: ``kube.decode_json``.)

An informer's :class:`Compactor` looks the subtrees at its *shared paths* up by their JSON text,
as each object enters the cache, and puts an equal subtree already cached in the new one's
place: equal text is the same structure with the same types, so readers see exactly what the
server sent. Cached objects were already read-only by contract (``store.py``); a shared subtree
makes that contract matter more, not differently. The table drops the subtrees no cached object
uses any more (a sweep each time it has doubled), so it holds at most twice what the caches use.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

Path = tuple[str, ...]

_MIN_SWEEP = 1024
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False).encode


class Compactor:
    """Shares, between the objects of one cache, equal subtrees at ``shared_paths``."""

    def __init__(self, shared_paths: Iterable[Path] = ()) -> None:
        self.shared_paths: tuple[Path, ...] = ()
        self.add_paths(shared_paths)
        self._shared: dict[str, Any] = {}
        self._sweep_at = _MIN_SWEEP
        self.hits = 0
        self.misses = 0

    def add_paths(self, paths: Iterable[Path]) -> None:
        self.shared_paths = tuple(dict.fromkeys((*self.shared_paths, *(tuple(p) for p in paths))))

    def __len__(self) -> int:
        return len(self._shared)

    def __call__(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj``, a freshly decoded object the cache will own, with its subtrees at the shared
        paths replaced (in place) by equal ones already cached."""
        for path in self.shared_paths:
            parent: Any = obj
            for key in path[:-1]:
                parent = parent.get(key) if type(parent) is dict else None
            if type(parent) is dict:
                subtree = parent.get(path[-1])
                if type(subtree) is dict or type(subtree) is list:
                    parent[path[-1]] = self._share(subtree)
        return obj

    def _share(self, subtree: Any) -> Any:
        text = _dumps(subtree)
        found = self._shared.get(text)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        self._shared[text] = subtree
        if len(self._shared) >= self._sweep_at:
            self.sweep()
        return subtree

    def sweep(self) -> None:
        """Forget the subtrees that nothing but this table holds any more."""
        alone = _alone_refcount()
        self._shared = {t: v for t, v in self._shared.items() if sys.getrefcount(v) > alone}
        self._sweep_at = max(_MIN_SWEEP, 2 * len(self._shared))


def _alone_refcount() -> int:
    """What ``sys.getrefcount`` says, in :meth:`Compactor.sweep`'s comprehension, of a value only
    its table holds (measured rather than assumed: it differs between interpreter versions)."""
    probe: dict[str, Any] = {"probe": {}}
    counts = [sys.getrefcount(v) for _, v in probe.items()]
    return counts[0]
