"""The in-memory copy of one watched resource, with named indexes.

Objects are stored as the API server sent them (less `managedFields`) and must be treated as
read-only by callers: deep-copy before editing.

The event loop's informers write it; the admission webhooks read it from a thread of their own
(webhooks/serving_thread.py). Writes and every read that walks the store hold its lock, so a
reader neither meets a dict changing size under it nor an update half applied (an object out
of its index for a moment). A read of one object by its key is one dict lookup: old or new.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rayquota.operator.core.resources import ObjectKey

Obj = dict[str, Any]
Indexer = Callable[[Mapping[str, Any]], Iterable[str]]


class Store:
    def __init__(self, indexers: Mapping[str, Indexer] | None = None) -> None:
        self._objects: dict[ObjectKey, Obj] = {}
        self._indexers: dict[str, Indexer] = dict(indexers or {})
        # index name -> index value -> keys
        self._indexes: dict[str, dict[str, set[ObjectKey]]] = {name: {} for name in self._indexers}
        self._lock = threading.RLock()  # an indexer may read the store it indexes

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    def add_indexer(self, name: str, indexer: Indexer) -> None:
        with self._lock:
            if name in self._indexers:
                return
            index: dict[str, set[ObjectKey]] = {}
            for key, obj in self._objects.items():
                for value in indexer(obj):
                    index.setdefault(value, set()).add(key)
            self._indexes[name] = index
            self._indexers[name] = indexer

    def get(self, namespace: str, name: str) -> Obj | None:
        return self._objects.get(ObjectKey(namespace, name))

    def get_key(self, key: ObjectKey) -> Obj | None:
        return self._objects.get(key)

    def object_keys(self) -> list[ObjectKey]:
        with self._lock:
            return list(self._objects)

    def list(self, namespace: str | None = None) -> list[Obj]:
        with self._lock:
            if namespace is None:
                return list(self._objects.values())
            return [obj for key, obj in self._objects.items() if key.namespace == namespace]

    def by_index(self, index: str, value: str) -> builtins.list[Obj]:
        with self._lock:
            keys = self._indexes[index].get(value, ())
            return [self._objects[key] for key in sorted(keys)]

    def upsert(self, obj: Obj) -> Obj | None:
        """Store an object; returns the one it replaced."""
        key = ObjectKey.of(obj)
        with self._lock:
            old = self._objects.get(key)
            if old is not None:
                self._unindex(key, old)
            self._objects[key] = obj
            for name, indexer in self._indexers.items():
                for value in indexer(obj):
                    self._indexes[name].setdefault(value, set()).add(key)
        return old

    def remove(self, key: ObjectKey) -> Obj | None:
        with self._lock:
            old = self._objects.pop(key, None)
            if old is not None:
                self._unindex(key, old)
        return old

    def _unindex(self, key: ObjectKey, obj: Obj) -> None:
        for name, indexer in self._indexers.items():
            index = self._indexes[name]
            for value in indexer(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]


def owner_uids(obj: Mapping[str, Any]) -> list[str]:
    """Indexer: the uids of an object's owners."""
    return [str(ref["uid"]) for ref in obj["metadata"].get("ownerReferences") or [] if ref.get("uid")]


def label_indexer(label: str) -> Indexer:
    """Indexer: "namespace/<label value>" for objects carrying the label."""

    def index(obj: Mapping[str, Any]) -> list[str]:
        value = (obj["metadata"].get("labels") or {}).get(label)
        return [f"{obj['metadata'].get('namespace') or ''}/{value}"] if value else []

    return index
