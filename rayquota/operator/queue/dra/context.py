"""The DRA settings and ResourceClaimTemplate lookup for the object whose demand is being read.

Kinds build their pod sets from API bodies alone (``podsets.pod_set``); a claim template is
another object. The demand read owns the lookup: every kind's ``pod_sets`` (and the quantity
check) is wrapped by :func:`counting_claims`, which binds, for the object's namespace, the
reading of the process's claim source (:func:`install`: the queue's watch-fed caches). No caller
binds anything. A reading bound explicitly with :func:`reading` (the simulator, tests) wins;
with neither, claims are charged nothing and refuse nothing."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from rayquota.operator.queue.dra.claims import ClaimTemplateLookup, TemplateCharges, template_charges
from rayquota.operator.queue.dra.settings import DraSettings


@dataclass(frozen=True)
class ClaimReading:
    settings: DraSettings
    claim_template: ClaimTemplateLookup


class ClaimSource(Protocol):
    """Where a namespace's claim templates are read from (the queue's caches)."""

    def claim_reading(self, namespace: str) -> ClaimReading: ...


_CURRENT: ContextVar[ClaimReading | None] = ContextVar("rayquota_dra_reading", default=None)
_SOURCE: list[weakref.ReferenceType[ClaimSource]] = []


def install(source: ClaimSource) -> None:
    """Make ``source`` the process's claim source (held weakly: it lives as long as its owner)."""
    _SOURCE[:] = [weakref.ref(source)]


def _installed() -> ClaimSource | None:
    return _SOURCE[0]() if _SOURCE else None


@contextmanager
def reading(settings: DraSettings, claim_template: ClaimTemplateLookup) -> Iterator[None]:
    token = _CURRENT.set(ClaimReading(settings, claim_template))
    try:
        yield
    finally:
        _CURRENT.reset(token)


@contextmanager
def namespace_reading(namespace: str) -> Iterator[None]:
    """The installed source's reading of ``namespace``, unless a reading is bound already."""
    source = _installed()
    if _CURRENT.get() is not None or source is None:
        yield
        return
    token = _CURRENT.set(source.claim_reading(namespace))
    try:
        yield
    finally:
        _CURRENT.reset(token)


Read = TypeVar("Read", bound=Callable[..., Any])


def counting_claims(read: Read) -> Read:
    """Wrap a demand read ``read(self, obj, ...)`` so that it counts the claims of ``obj``'s
    namespace."""

    @functools.wraps(read)
    def with_claims(self: Any, obj: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
        with namespace_reading(namespace_of(obj)):
            return read(self, obj, *args, **kwargs)

    return with_claims  # type: ignore[return-value]


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def charges(pod_spec: Mapping[str, Any], where: str) -> TemplateCharges:
    """What ``pod_spec``'s claims charge per pod under the bound reading (nothing when unbound)."""
    current = _CURRENT.get()
    if current is None or not pod_spec.get("resourceClaims"):
        return TemplateCharges()
    return template_charges(pod_spec, where, current.settings, current.claim_template)


def names_claims(pod_specs: Iterable[Mapping[str, Any]]) -> bool:
    """Does any of these pod specs name resourceClaims? Its demand then depends on objects
    beside it (claim templates) and on the bound reading: it is not memoised by spec alone."""
    return any(isinstance(spec, Mapping) and spec.get("resourceClaims") for spec in pod_specs)
