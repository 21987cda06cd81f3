"""A small async Kubernetes REST client for the reconcilers.

Objects travel as plain camelCase dicts, exactly as the API server sends them, so reconcilers
never depend on generated model classes. Credentials come from the `kubernetes` package's
config loaders (kubeconfig or in-cluster service account).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, cast

import aiohttp
import kubernetes

from rayquota import __version__
from rayquota.operator.reachability import Reachability

log = logging.getLogger(__name__)

# How the API server's audit log and its per-client views name our requests (client-go sends
# `<program>/<version>` the same way): `rayquota/0.2.0`, not aiohttp's generic default.
USER_AGENT = f"rayquota/{__version__}"

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"  # JSON is YAML


# What a request raises when it never got an answer (the API server down or restarting, the
# connection cut, no answer in time) after the client's own retries: the caller retries later.
UNREACHABLE: tuple[type[BaseException], ...] = (aiohttp.ClientError, TimeoutError)

# Answers of an API server that is starting (paths not yet installed, storage initialising) or
# overloaded: like no answer, transient; the request is retried, it is no bug of ours.
NOT_READY_STATUSES = frozenset({429, 503, 504})


def is_transient(exc: BaseException) -> bool:
    """No answer from the API server, or an answer that says it cannot serve yet."""
    return isinstance(exc, UNREACHABLE) or (isinstance(exc, ApiError) and exc.status in NOT_READY_STATUSES)


_NAMESPACE_ENDING = "because it is being terminated"


def is_namespace_ending(exc: BaseException) -> bool:
    """A create refused because its namespace is being deleted (a 403, told by the API server's
    words, which a reconcile may have wrapped in its own)."""
    return _NAMESPACE_ENDING in str(exc)


INTERN_MAX_CHARS = 64
# Values unique to one object (or one version of it): interning them would only grow the table.
_UNIQUE_VALUE_KEYS = frozenset({"uid", "resourceVersion"})
_intern = sys.intern


def _interned_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {
        _intern(k): _intern(v)
        if type(v) is str and len(v) <= INTERN_MAX_CHARS and k not in _UNIQUE_VALUE_KEYS
        else v
        for k, v in pairs
    }


_INTERNING = json.JSONDecoder(object_pairs_hook=_interned_pairs)

Decode = Callable[[str | bytes], Any]


def decode_json(text: str | bytes) -> Any:
    """``json.loads`` with every key and short string value interned, for caches that hold many
    objects alike: ``json.loads`` gives each a new string, and keys are most of a cached object's
    strings (50,000 Workloads held 50,000 copies of ``"lastTransitionTime"``, and of ``"True"``).
    The objects are equal to what ``json.loads`` returns; decoding costs more (a Python call per
    dict), so informers ask for it (``Informer(interned=True)``) only where the objects are many."""
    return _INTERNING.decode(text.decode() if isinstance(text, bytes) else text)


class ApiError(Exception):
    def __init__(
        self, method: str, path: str, status: int, body: str, *, retry_after_s: float | None = None
    ) -> None:
        try:
            message = json.loads(body).get("message", body)
        except ValueError:
            message = body
        super().__init__(f"{method} {path} -> {status}: {message}")
        self.status = status
        self.message = str(message)
        self.body = body
        # The server's Retry-After (a 429 while its storage initialises says 1 s).
        self.retry_after_s = retry_after_s


def _retry_after(resp: aiohttp.ClientResponse) -> float | None:
    try:
        return float(resp.headers["Retry-After"])
    except (KeyError, ValueError):
        return None


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


def core_path(namespace: str | None, plural: str, name: str | None = None) -> str:
    base = f"/api/v1/namespaces/{namespace}/{plural}" if namespace else f"/api/v1/{plural}"
    return f"{base}/{name}" if name else base


def group_path(group: str, version: str, namespace: str | None, plural: str, name: str | None = None) -> str:
    base = f"/apis/{group}/{version}"
    base = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
    return f"{base}/{name}" if name else base


# How long read credentials are reused. The client library re-reads a projected service-account
# token at most once a minute and exec plugins issue tokens that live for minutes, so a minute
# never sends an expired token for long; a 401 forces a re-read before the next request.
AUTH_REFRESH_INTERVAL_S = 60.0


class AuthHeaders:
    """The credential headers of a client-library Configuration, read off the event loop.

    `Configuration.auth_settings()` may run a token-refresh hook (an exec plugin is a subprocess),
    so it runs in a worker thread, once per interval or after a 401, never once per request.
    """

    def __init__(
        self,
        configuration: kubernetes.client.Configuration,
        *,
        refresh_interval_s: float = AUTH_REFRESH_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = configuration
        self._interval_s = refresh_interval_s
        self._clock = clock
        self._headers: dict[str, str] | None = None
        self._due_at = 0.0
        self._lock: asyncio.Lock | None = None

    async def get(self) -> dict[str, str]:
        if self._headers is not None and self._clock() < self._due_at:
            return self._headers
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            # Requests that waited here find the headers another one has just read.
            if self._headers is None or self._clock() >= self._due_at:
                self._headers = await asyncio.to_thread(self.read)
                self._due_at = self._clock() + self._interval_s
        return self._headers

    def expire(self) -> None:
        """The server refused the credentials: read them again before the next request."""
        self._due_at = 0.0

    def read(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        # auth_settings() knows where the client library keeps a bearer token (the key name
        # changed between releases: "authorization" before, "BearerToken" now).
        settings: Mapping[str, Mapping[str, Any]] = cast(Any, self._config.auth_settings())
        for setting in settings.values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"]).title()] = str(setting["value"])
        return headers


class KubeClient:
    """One aiohttp session per client; share one client per operator process."""

    def __init__(
        self,
        configuration: kubernetes.client.Configuration,
        *,
        timeout_s: float = 30.0,
        user_agent: str | None = None,
    ) -> None:
        self._config = configuration
        self._user_agent = user_agent
        self._host = configuration.host.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        # Watches hold their connection for as long as they run, one per kind and namespace
        # watched: in a pool of their own, without a limit, so that many watched namespaces
        # never leave requests (lists, writes, the Lease) waiting for a free connection.
        self._watch_session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | bool = self._ssl_context(configuration)
        self._auth = AuthHeaders(configuration)
        self.reachability = Reachability()

    @classmethod
    def from_environment(cls, kubeconfig: str | None = None) -> KubeClient:
        """In-cluster credentials when running in a pod, else the kubeconfig (KUBECONFIG)."""
        configuration = kubernetes.client.Configuration()
        try:
            kubernetes.config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except kubernetes.config.ConfigException:
            # Read KUBECONFIG now: the client library's default is fixed when it is imported.
            kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig or os.environ.get("KUBECONFIG"), client_configuration=configuration
            )
        return cls(configuration)

    def clone(self) -> KubeClient:
        """Same server and credentials, own connections: for another thread's event loop."""
        return KubeClient(self._config, timeout_s=self._timeout.total or 30.0, user_agent=self._user_agent)

    @staticmethod
    def _ssl_context(configuration: kubernetes.client.Configuration) -> ssl.SSLContext | bool:
        if not configuration.host.startswith("https"):
            return False
        if not configuration.verify_ssl:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
        if configuration.cert_file:
            context.load_cert_chain(configuration.cert_file, configuration.key_file)
        return context

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        # A client of the operator names the operator; one for another purpose (the MultiKueue
        # manager's worker clients) may name itself instead.
        user_agent = self._user_agent or USER_AGENT
        headers = {"Accept": "application/json", "User-Agent": user_agent, **await self._auth.get()}
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    async def close(self) -> None:
        for session in (self._session, self._watch_session):
            if session is not None:
                await session.close()
        self._session = self._watch_session = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str | None = None,
        decode: Decode = json.loads,
    ) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        data = None if body is None else json.dumps(body)
        if data is not None and content_type is None:
            content_type = "application/json"
        for attempt in range(3):
            try:
                async with self._session.request(
                    method,
                    self._host + path,
                    data=data,
                    params=dict(params or {}),
                    headers=await self._headers(content_type),
                    ssl=self._ssl,
                ) as resp:
                    self.reachability.answered()
                    text = await resp.text()
                    if resp.status == 401:
                        self._auth.expire()
                    if resp.status == 404:
                        raise NotFound(method, path, resp.status, text)
                    if resp.status == 409:
                        raise Conflict(method, path, resp.status, text)
                    if resp.status >= 500 and attempt < 2:
                        await asyncio.sleep(0.2 * (attempt + 1))
                        continue
                    if resp.status >= 400:
                        raise ApiError(method, path, resp.status, text, retry_after_s=_retry_after(resp))
                    return decode(text) if text else None
            except (aiohttp.ClientConnectionError, TimeoutError):
                self.reachability.failed()
                if attempt == 2:
                    raise
                await asyncio.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")

    async def stream_lines(
        self, path: str, params: Mapping[str, str], *, read_timeout_s: float, decode: Decode = json.loads
    ) -> AsyncIterator[dict[str, Any]]:
        """GET a streaming endpoint (a watch) and yield one JSON document per line.

        Lines are split here, not by aiohttp's readline, whose line limit is smaller than a
        large object."""
        if self._watch_session is None:
            self._watch_session = aiohttp.ClientSession(
                timeout=self._timeout, connector=aiohttp.TCPConnector(limit=0)
            )
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout_s)
        url = self._host + path
        headers = await self._headers(None)
        request = self._watch_session.get(
            url, params=dict(params), headers=headers, ssl=self._ssl, timeout=timeout
        )
        try:
            async with request as resp:
                self.reachability.answered()
                if resp.status >= 400:
                    text = await resp.text()
                    if resp.status == 401:
                        self._auth.expire()
                    if resp.status == 404:
                        raise NotFound("GET", path, resp.status, text)
                    raise ApiError("GET", path, resp.status, text, retry_after_s=_retry_after(resp))
                buffer = b""
                async for chunk in resp.content.iter_any():
                    buffer += chunk
                    while (newline := buffer.find(b"\n")) >= 0:
                        line, buffer = buffer[:newline], buffer[newline + 1 :]
                        if line.strip():
                            yield decode(line)
                if buffer.strip():
                    yield decode(buffer)
        except (aiohttp.ClientConnectionError, TimeoutError):
            self.reachability.failed()  # refused, or cut: the server went away
            raise

    async def list_page(
        self, path: str, params: Mapping[str, str], decode: Decode = json.loads
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", path, params=params, decode=decode)
        return result

    async def replace(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("PUT", path, body=dict(body))
        return result

    # --- conveniences ----------------------------------------------------------------------

    async def get(self, path: str) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = await self.request("GET", path)
            return result
        except NotFound:
            return None

    async def list_items(self, path: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        params = {"labelSelector": label_selector} if label_selector else None
        result = await self.request("GET", path, params=params)
        return list(result.get("items") or [])

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("POST", path, body=dict(body))
        return result

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("PATCH", path, body=dict(patch), content_type=MERGE_PATCH)
        return result

    async def apply(self, path: str, body: Mapping[str, Any], field_manager: str) -> dict[str, Any]:
        """Server-side apply, taking ownership of every field in ``body`` (force)."""
        params = {"fieldManager": field_manager, "force": "true"}
        result: dict[str, Any] = await self.request(
            "PATCH", path, body=dict(body), params=params, content_type=APPLY_PATCH
        )
        return result

    async def json_patch(self, path: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("PATCH", path, body=ops, content_type=JSON_PATCH)
        return result

    async def patch_status(self, path: str, status: Mapping[str, Any]) -> dict[str, Any] | None:
        try:
            return await self.merge_patch(f"{path}/status", {"status": dict(status)})
        except NotFound:
            return None

    async def delete(
        self, path: str, *, propagation: str = "Background", grace_seconds: int | None = None
    ) -> bool:
        """Delete; False when it was already gone."""
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        try:
            await self.request("DELETE", path, body=body)
            return True
        except NotFound:
            return False
