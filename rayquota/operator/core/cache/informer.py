"""List and watch one resource into a Store, and tell subscribers what changed.

A watch resumes from the last resourceVersion it saw (bookmarks keep that fresh); a 410 Gone
or an expired version means a fresh LIST, after which objects that vanished meanwhile are
reported as DELETED. Label selectors are applied by the API server, so objects that are not
ours never reach the process.

An ``optional`` resource (its CRD is another project's, `Resource.optional`) that the API server
does not serve (a LIST answered 404) counts as listed and empty, so the operator starts without
it; the LIST is tried again with a growing pause (1 s up to 2 min, as Kueue waits for an
integration's CRD) and the watch starts once the CRD is installed. Both moments are logged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rayquota.operator.core.cache.compact import Compactor, Path
from rayquota.operator.core.cache.scope import NamespaceScope
from rayquota.operator.core.cache.store import Indexer, Obj, Store
from rayquota.operator.core.cancellation import stop_if_cancelled
from rayquota.operator.core.resources import ObjectKey, Resource
from rayquota.operator.kube import ApiError, Decode, KubeClient, decode_json

log = logging.getLogger(__name__)

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
ChangeHandler = Callable[[str, Obj, Obj | None], None]

LIST_PAGE_SIZE = 500
# How long an optional resource's LIST waits before it is tried again while it is not served.
ABSENT_RETRY_S = (1.0, 120.0)


class WatchExpired(Exception):
    """The server no longer has the resourceVersion the watch asked for (410 Gone)."""


def _strip(obj: Obj) -> Obj:
    # managedFields are a large share of every object and nothing here reads them.
    obj.get("metadata", {}).pop("managedFields", None)
    return obj


class Informer:
    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        scope: NamespaceScope,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, Indexer] | None = None,
        watch_timeout_s: tuple[int, int] = (300, 600),
        shared_paths: Iterable[Path] = (),
        interned: bool = False,
    ) -> None:
        """``shared_paths``: subtrees many objects hold equal (a Workload's ``spec``): the cache keeps
        one copy of each (``compact.py``); ``interned``: keys and short values are interned as the
        objects are decoded (``kube.decode_json``), for caches of many objects alike."""
        self.client = client
        self.resource = resource
        self.scope = scope
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.store = Store(indexers)
        self.compact = Compactor(shared_paths)
        self.decode: Decode = decode_json if interned else json.loads
        self._handlers: list[ChangeHandler] = []
        self._watch_timeout_s = watch_timeout_s
        self._targets = scope.watch_targets(resource.namespaced)
        self._listed: set[str | None] = set()
        self.synced = asyncio.Event()
        self.relists = 0  # how many times a LIST was needed (start-up included)
        self.served = True  # False while an optional resource is not served (its CRD absent)

    def __repr__(self) -> str:
        selectors = [s for s in (self.label_selector, self.field_selector) if s]
        selector = f" [{'; '.join(selectors)}]" if selectors else ""
        return f"Informer({self.resource}{selector})"

    def on_change(self, handler: ChangeHandler) -> None:
        self._handlers.append(handler)

    async def run(self) -> None:
        await asyncio.gather(*(self._list_and_watch(target) for target in self._targets))

    # --- internals -------------------------------------------------------------------------------

    def _params(self) -> dict[str, str]:
        params = {"labelSelector": self.label_selector} if self.label_selector else {}
        if self.field_selector:
            # Objects that stop matching (a pod that finished) arrive as DELETED events.
            params["fieldSelector"] = self.field_selector
        return params

    async def _list_and_watch(self, namespace: str | None) -> None:
        version: str | None = None
        failures = 0
        # The first LIST is served by the API server's watch cache (resourceVersion=0, whole, as
        # client-go's reflector lists): a paged LIST from etcd under a flood of writes gets its
        # next pages refused (504, "Too large resource version") while the cache lags, and a
        # restarted LIST meets the same fate; the operator never synced while Kueue's runner
        # created 50,000 Workloads. After a 410 Gone the LIST is a consistent read: the cache may
        # hold less than we saw; if that one is refused so, the cache serves the next one.
        from_cache = True
        absent = 0  # LISTs in a row an optional resource was not served
        while True:
            try:
                if version is None:
                    version = await self._relist(namespace, from_cache=from_cache)
                    self._now_served(absent)
                    self._mark_listed(namespace)
                    failures = absent = 0
                version = await self._watch(namespace, version)
                failures = 0
            except asyncio.CancelledError:
                raise
            except WatchExpired:
                version, from_cache = None, False
            except Exception as exc:  # network trouble, API server restarts: back off and resume
                stop_if_cancelled(exc)
                if version is None and self._not_served(exc):
                    absent += 1
                    await self._wait_for_resource(namespace, absent)
                    continue
                if version is None and isinstance(exc, ApiError) and exc.status == 504:
                    from_cache = True
                failures += 1
                delay = min(30.0, 0.2 * 2**failures) * (0.5 + random.random() / 2)
                if isinstance(exc, ApiError) and exc.retry_after_s is not None:
                    delay = min(delay, max(0.1, exc.retry_after_s))  # the server says when
                level = logging.DEBUG if failures == 1 else logging.WARNING
                log.log(level, "%r watch in %s failed (%s); retrying in %.1fs", self, namespace, exc, delay)
                # Cut short when the API server answers again after it did not: its return
                # must not wait for the backoff an outage built up.
                await self.client.reachability.sleep(delay)

    def _not_served(self, exc: Exception) -> bool:
        return self.resource.optional and isinstance(exc, ApiError) and exc.status == 404

    async def _wait_for_resource(self, namespace: str | None, absent: int) -> None:
        """An optional resource not served: listed as empty (what was cached of it goes), and
        its LIST tried again after a pause."""
        if self.served:
            log.info("%s is not served (its CRD is not installed): its kind waits for it", self.resource)
            self.served = False
        for key in [k for k in self.store.object_keys() if namespace is None or k.namespace == namespace]:
            old = self.store.get_key(key)
            if old is not None:
                self._apply(DELETED, old)
        self._mark_listed(namespace)
        low, high = ABSENT_RETRY_S
        await self.client.reachability.sleep(min(high, low * 2 ** (absent - 1)))

    def _now_served(self, absent: int) -> None:
        if absent and not self.served:
            log.info("%s is served now: watching it", self.resource)
        self.served = True

    async def _relist(self, namespace: str | None, *, from_cache: bool = False) -> str:
        self.relists += 1
        path = self.resource.path(namespace)
        params = {**self._params(), "limit": str(LIST_PAGE_SIZE)}
        if from_cache:
            params["resourceVersion"] = "0"
        items: list[Obj] = []
        while True:
            page = await self.client.list_page(path, params, decode=self.decode)
            items.extend(self.compact(self._typed(_strip(item))) for item in page.get("items") or [])
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                version = str(meta.get("resourceVersion") or "")
                break
            params = {k: v for k, v in params.items() if k != "resourceVersion"}  # not with continue
            params = {**params, "continue": meta["continue"]}
        seen: set[ObjectKey] = set()
        for item in items:
            if not self.scope.admits(item["metadata"].get("namespace")):
                continue
            seen.add(ObjectKey.of(item))
            self._apply(MODIFIED, item)
        stale = [
            key
            for key in self.store.object_keys()
            if key not in seen and (namespace is None or key.namespace == namespace)
        ]
        for key in stale:
            old = self.store.get_key(key)
            if old is not None:
                self._apply(DELETED, old)
        return version

    def _typed(self, item: Obj) -> Obj:
        """A LIST of a built-in kind (a Job) leaves out each item's apiVersion and kind; a watch
        event carries them. Filled in, so every cached object says what it is."""
        item.setdefault("apiVersion", self.resource.api_version)
        item.setdefault("kind", self.resource.kind)
        return item

    def _mark_listed(self, namespace: str | None) -> None:
        self._listed.add(namespace)
        if len(self._listed) == len(self._targets):
            self.synced.set()

    async def _watch(self, namespace: str | None, version: str) -> str:
        low, high = self._watch_timeout_s
        timeout = random.randint(low, high)
        params = {
            **self._params(),
            "watch": "1",
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout),
        }
        try:
            async for event in self.client.stream_lines(
                self.resource.path(namespace), params, read_timeout_s=timeout + 30, decode=self.decode
            ):
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise WatchExpired(obj.get("message"))
                    raise ApiError(
                        "WATCH", self.resource.path(namespace), int(obj.get("code") or 500), str(obj)
                    )
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if kind == "BOOKMARK":
                    continue
                if not self.scope.admits((obj.get("metadata") or {}).get("namespace")):
                    continue
                self._apply(str(kind), self.compact(_strip(obj)))
        except ApiError as exc:
            if exc.status == 410:
                raise WatchExpired(exc.message) from exc
            raise
        return version

    def _apply(self, kind: str, obj: Obj) -> None:
        if kind == DELETED:
            old = self.store.remove(ObjectKey.of(obj))
            if old is None:
                return
            self._notify(DELETED, obj, old)
            return
        old = self.store.upsert(obj)
        if old is not None and _version(old) == _version(obj):
            return  # a relist delivering what we already have
        self._notify(ADDED if old is None else MODIFIED, obj, old)

    def _notify(self, kind: str, obj: Obj, old: Obj | None) -> None:
        for handler in self._handlers:
            try:
                handler(kind, obj, old)
            except Exception:
                log.exception("%r: a change handler failed on %s %s", self, kind, ObjectKey.of(obj))


def _version(obj: Mapping[str, Any]) -> str | None:
    return (obj.get("metadata") or {}).get("resourceVersion")
