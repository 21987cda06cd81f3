"""Who is asking, and what they may see.

Every API request carries a bearer token (a ServiceAccount token, or the user's own from their
kubeconfig). The API server says whose it is (TokenReview) and what that user may ``list``,
namespace by namespace (SubjectAccessReview); the dashboard then answers only with objects of
those namespaces. Both answers are cached for a short while, so a page in live mode costs the
API server nothing per update, and a revoked permission takes effect within ``ttl_s``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rayquota.operator.core.resources import Resource
from rayquota.operator.kube import ApiError, KubeClient

log = logging.getLogger(__name__)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
CACHE_TTL_S = 30.0
DENIED_TOKEN_TTL_S = 5.0
CONCURRENT_REVIEWS = 16
ALL_NAMESPACES = "*"


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, tuple[str, ...]]:
        return (self.name, self.uid, self.groups)


@dataclass(frozen=True)
class Visibility:
    """What one user may list: per resource (``str(Resource)``), ``ALL_NAMESPACES`` or the
    namespaces allowed; cluster-scoped resources are allowed or not as a whole."""

    user: User
    allowed: Mapping[str, frozenset[str]]

    def may_list(self, resource: Resource, namespace: str | None = None) -> bool:
        granted = self.allowed.get(str(resource), frozenset())
        if ALL_NAMESPACES in granted:
            return True
        return bool(namespace) and namespace in granted

    def namespaces(self, resource: Resource) -> frozenset[str] | None:
        """None: every namespace."""
        granted = self.allowed.get(str(resource), frozenset())
        return None if ALL_NAMESPACES in granted else granted

    @classmethod
    def everything(cls, user: User, resources: Iterable[Resource]) -> Visibility:
        return cls(user, {str(r): frozenset({ALL_NAMESPACES}) for r in resources})


class TtlCache:
    """Values with an expiry; a value being computed is shared by everyone who asks for it."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._values: dict[Any, tuple[float, Any]] = {}
        self._inflight: dict[Any, asyncio.Future[Any]] = {}

    async def get(self, key: Any, compute: Callable[[], Awaitable[tuple[Any, float]]]) -> Any:
        hit = self._values.get(key)
        if hit is not None and hit[0] > self._clock():
            return hit[1]
        running = self._inflight.get(key)
        if running is not None:
            return await asyncio.shield(running)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            value, ttl_s = await compute()
            self._values[key] = (self._clock() + ttl_s, value)
            if len(self._values) > 50_000:
                self._drop_expired()
            future.set_result(value)
            return value
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            del self._inflight[key]

    def _drop_expired(self) -> None:
        now = self._clock()
        for key in [k for k, (expiry, _) in self._values.items() if expiry <= now]:
            del self._values[key]


class AccessReviewer:
    def __init__(
        self, client: KubeClient, *, ttl_s: float = CACHE_TTL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self._tokens = TtlCache(clock)
        self._reviews = TtlCache(clock)
        self._limit = asyncio.Semaphore(CONCURRENT_REVIEWS)
        self.reviews_sent = 0

    async def authenticate(self, token: str) -> User | None:
        """The token's user, or None when the API server does not accept it."""
        digest = hashlib.sha256(token.encode()).hexdigest()  # tokens are never kept in clear

        async def review() -> tuple[User | None, float]:
            body = {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            }
            async with self._limit:
                self.reviews_sent += 1
                answer = await self.client.create(TOKEN_REVIEWS, body)
            status = answer.get("status") or {}
            if not status.get("authenticated"):
                return None, DENIED_TOKEN_TTL_S
            user = status.get("user") or {}
            return (
                User(
                    str(user.get("username") or ""),
                    str(user.get("uid") or ""),
                    tuple(str(g) for g in user.get("groups") or ()),
                    {str(k): tuple(str(v) for v in vs or ()) for k, vs in (user.get("extra") or {}).items()},
                ),
                self.ttl_s,
            )

        result: User | None = await self._tokens.get(digest, review)
        return result

    async def may_list(self, user: User, resource: Resource, namespace: str | None) -> bool:
        key = (user.key, str(resource), namespace or "")

        async def review() -> tuple[bool, float]:
            attributes: dict[str, Any] = {
                "verb": "list",
                "group": resource.group,
                "resource": resource.plural,
            }
            if namespace:
                attributes["namespace"] = namespace
            spec: dict[str, Any] = {
                "user": user.name,
                "groups": list(user.groups),
                "resourceAttributes": attributes,
            }
            if user.uid:
                spec["uid"] = user.uid
            if user.extra:
                spec["extra"] = {k: list(v) for k, v in user.extra.items()}
            body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
            async with self._limit:
                self.reviews_sent += 1
                answer = await self.client.create(ACCESS_REVIEWS, body)
            return bool((answer.get("status") or {}).get("allowed")), self.ttl_s

        allowed: bool = await self._reviews.get(key, review)
        return allowed

    async def visibility(self, user: User, wanted: Mapping[Resource, Iterable[str]]) -> Visibility:
        """Per resource: everything when the user may list it cluster-wide, else the namespaces
        among ``wanted[resource]`` (those the cache holds objects in) where they may."""

        async def one(resource: Resource, namespaces: Iterable[str]) -> tuple[str, frozenset[str]]:
            if await self.may_list(user, resource, None):
                return str(resource), frozenset({ALL_NAMESPACES})
            if not resource.namespaced:
                return str(resource), frozenset()
            names = sorted(set(namespaces))
            answers = await asyncio.gather(*(self.may_list(user, resource, ns) for ns in names))
            return str(resource), frozenset(ns for ns, ok in zip(names, answers, strict=True) if ok)

        try:
            pairs = await asyncio.gather(*(one(r, ns) for r, ns in wanted.items()))
        except ApiError as exc:
            log.warning("access review failed: %s", exc)
            raise
        return Visibility(user, dict(pairs))
