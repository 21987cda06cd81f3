"""An in-memory API server for in-process benchmarks: the operator's `KubeClient` calls answered
from a dict, watches fed from the same writes.

Objects are kept as JSON bytes and every answer or watch event is decoded afresh, as the real
client decodes each response, so the operator's caches hold the same kind of objects (fresh
dicts and strings, nothing shared with the server or with another informer) as against a real
API server. Only what the operator and Kueue's benchmark runner use is implemented: list,
watch, get, create, replace (object and status), server-side apply of a status (our own field
manager owning all of it), merge patch, delete. No admission, defaulting or validation; label
and field selectors are ignored (the benchmarks create no object they would filter out).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rayquota.operator.kube import Conflict, Decode, NotFound

Obj = dict[str, Any]
Collection = tuple[str, str]  # (group/version, plural)


@dataclass(frozen=True)
class Target:
    collection: Collection
    namespace: str  # "" for cluster-scoped objects or all namespaces
    name: str | None
    sub: str | None


def parse_path(path: str) -> Target:
    """`/api/v1/namespaces/ns/pods/p/status` -> ((v1, pods), ns, p, status)."""
    parts = [p for p in path.split("/") if p]
    if parts[0] == "api":
        group_version, rest = parts[1], parts[2:]
    else:
        group_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    plural, name, sub = rest[0], rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None
    return Target((group_version, plural), namespace, name, sub)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, Mapping):
        return patch
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Request:
    """One request as the audit log would show it."""

    client: str
    verb: str
    collection: Collection
    sub: str | None


@dataclass
class FakeApiServer:
    """The store and the watches. ``client(name)`` is a `KubeClient` stand-in whose requests are
    counted under ``name``; ``on_change`` hooks see every write (the runner's controller)."""

    _objects: dict[Collection, dict[tuple[str, str], bytes]] = field(default_factory=dict)
    _watches: dict[Collection, list[tuple[str, asyncio.Queue[bytes]]]] = field(default_factory=dict)
    _version: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    requests: list[Request] = field(default_factory=list)
    hooks: list[Callable[[str, Collection, Obj], None]] = field(default_factory=list)
    keep_requests: bool = False
    request_counts: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def client(self, name: str) -> FakeClient:
        return FakeClient(self, name)

    # --- bookkeeping ---------------------------------------------------------------------

    def count(self, client: str, verb: str, target: Target) -> None:
        plural = target.collection[1] + (f"/{target.sub}" if target.sub else "")
        key = (client, verb, plural)
        self.request_counts[key] = self.request_counts.get(key, 0) + 1

    def objects(self, collection: Collection) -> dict[tuple[str, str], bytes]:
        return self._objects.setdefault(collection, {})

    def _store(self, kind: str, target: Target, obj: Obj) -> Obj:
        data = json.dumps(obj, separators=(",", ":")).encode()
        key = (str(obj["metadata"].get("namespace") or ""), str(obj["metadata"]["name"]))
        if kind == "DELETED":
            self.objects(target.collection).pop(key, None)
        else:
            self.objects(target.collection)[key] = data
        event = b'{"type":"%s","object":%s}' % (kind.encode(), data)
        for namespace, queue in self._watches.get(target.collection, []):
            if not namespace or namespace == key[0]:
                queue.put_nowait(event)
        for hook in self.hooks:
            hook(kind, target.collection, json.loads(data))
        return json.loads(data)  # type: ignore[no-any-return]

    def _current(self, target: Target) -> Obj:
        data = self.objects(target.collection).get((target.namespace, target.name or ""))
        if data is None:
            raise NotFound("GET", str(target), 404, "not found")
        return json.loads(data)  # type: ignore[no-any-return]

    def _check_version(self, body: Mapping[str, Any], current: Obj, target: Target) -> None:
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise Conflict("PUT", str(target), 409, "the object has been modified")

    # --- the verbs -----------------------------------------------------------------------

    def list(self, target: Target) -> bytes:
        items = b",".join(
            data
            for (namespace, _), data in self.objects(target.collection).items()
            if not target.namespace or namespace == target.namespace
        )
        return b'{"items":[%s],"metadata":{"resourceVersion":"%d"}}' % (items, next(self._version))

    def get(self, target: Target) -> Obj:
        return self._current(target)

    def create(self, target: Target, body: Mapping[str, Any]) -> Obj:
        obj = json.loads(json.dumps(body))
        meta = obj.setdefault("metadata", {})
        if target.namespace:
            meta["namespace"] = target.namespace
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if (meta.get("namespace") or "", meta["name"]) in self.objects(target.collection):
            raise Conflict("POST", str(target), 409, "already exists")
        meta.update(
            uid=str(uuid.uuid4()),
            resourceVersion=str(next(self._version)),
            generation=1,
            creationTimestamp=now_rfc3339(),
        )
        return self._store("ADDED", target, obj)

    def replace(self, target: Target, body: Mapping[str, Any]) -> Obj:
        current = self._current(target)
        self._check_version(body, current, target)
        if target.sub == "status":
            current["status"] = body.get("status")
        else:
            status = current.get("status")
            spec_changed = body.get("spec") != current.get("spec")
            current = {
                **json.loads(json.dumps(body)),
                "metadata": {**current["metadata"], **body["metadata"]},
            }
            if status is not None:
                current["status"] = status
            if spec_changed:
                current["metadata"]["generation"] = int(current["metadata"].get("generation") or 1) + 1
        current["metadata"]["resourceVersion"] = str(next(self._version))
        return self._store("MODIFIED", target, current)

    def apply_status(self, target: Target, body: Mapping[str, Any]) -> Obj:
        """Server-side apply of a status whose every field the applier owns (the operator's)."""
        current = self._current(target)
        self._check_version(body, current, target)
        current["status"] = json.loads(json.dumps(body.get("status") or {}))
        current["metadata"]["resourceVersion"] = str(next(self._version))
        return self._store("MODIFIED", target, current)

    def patch(self, target: Target, patch: Mapping[str, Any]) -> Obj:
        current = self._current(target)
        if target.sub == "status":
            patch = {"status": patch.get("status")}
        merged: Obj = merge_patch(current, patch)
        merged["metadata"]["resourceVersion"] = str(next(self._version))
        return self._store("MODIFIED", target, merged)

    def delete(self, target: Target) -> Obj:
        current = self._current(target)
        return self._store("DELETED", target, current)

    async def watch(self, target: Target) -> AsyncIterator[bytes]:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        entry = (target.namespace, queue)
        self._watches.setdefault(target.collection, []).append(entry)
        try:
            while True:
                yield await queue.get()
        finally:
            self._watches[target.collection].remove(entry)


@dataclass
class FakeClient:
    """What the operator calls on its `KubeClient`, answered by a `FakeApiServer`."""

    server: FakeApiServer
    name: str

    def _target(self, verb: str, path: str) -> Target:
        target = parse_path(path)
        self.server.count(self.name, verb, target)
        return target

    async def close(self) -> None:
        return None

    def clone(self) -> FakeClient:
        return self

    async def list_page(
        self, path: str, params: Mapping[str, str], decode: Decode = json.loads
    ) -> dict[str, Any]:
        return decode(self.server.list(self._target("LIST", path)))  # type: ignore[no-any-return]

    async def list_items(self, path: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        return list(json.loads(self.server.list(self._target("LIST", path)))["items"])

    async def stream_lines(
        self, path: str, params: Mapping[str, str], *, read_timeout_s: float, decode: Decode = json.loads
    ) -> AsyncIterator[dict[str, Any]]:
        async for event in self.server.watch(self._target("WATCH", path)):
            yield decode(event)

    async def get(self, path: str) -> dict[str, Any] | None:
        try:
            return self.server.get(self._target("GET", path))
        except NotFound:
            return None

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.server.create(self._target("POST", path), body)

    async def replace(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.server.replace(self._target("PUT", path), body)

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        return self.server.patch(self._target("PATCH", path), patch)

    async def apply(self, path: str, body: Mapping[str, Any], field_manager: str) -> dict[str, Any]:
        return self.server.apply_status(self._target("PATCH", path), body)

    async def patch_status(self, path: str, status: Mapping[str, Any]) -> dict[str, Any] | None:
        try:
            return self.server.patch(self._target("PATCH", f"{path}/status"), {"status": dict(status)})
        except NotFound:
            return None

    async def delete(
        self, path: str, *, propagation: str = "Background", grace_seconds: int | None = None
    ) -> bool:
        try:
            self.server.delete(self._target("DELETE", path))
            return True
        except NotFound:
            return False

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str | None = None,
    ) -> Any:
        if method == "GET":
            target = self._target("GET", path)
            return self.server.get(target) if target.name else json.loads(self.server.list(target))
        if method == "POST":
            return await self.create(path, body)
        if method == "PUT":
            return await self.replace(path, body)
        if method == "PATCH":
            return await self.merge_patch(path, body)
        if method == "DELETE":
            return await self.delete(path)
        raise ValueError(method)
