"""The DRA settings and ResourceClaimTemplate lookup for the object whose demand is being read.

Kinds build their pod sets from API bodies alone (``podsets.pod_set``); a claim template is
another object. The caller that reads one object's demand (the Workload reconciler, the
webhook) binds the lookup of that object's namespace around the read with :func:`reading`;
outside it, claims are charged nothing and refuse nothing."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from rayquota.operator.queue.dra.claims import ClaimTemplateLookup, TemplateCharges, template_charges
from rayquota.operator.queue.dra.settings import DraSettings


@dataclass(frozen=True)
class ClaimReading:
    settings: DraSettings
    claim_template: ClaimTemplateLookup


_CURRENT: ContextVar[ClaimReading | None] = ContextVar("rayquota_dra_reading", default=None)


@contextmanager
def reading(settings: DraSettings, claim_template: ClaimTemplateLookup) -> Iterator[None]:
    token = _CURRENT.set(ClaimReading(settings, claim_template))
    try:
        yield
    finally:
        _CURRENT.reset(token)


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
