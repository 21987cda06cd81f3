"""The resource quantities in a queued object's pod templates that cannot be read, each named by
its field and value: the webhook refuses such an object, and without the webhook the queue
keeps it gated with the reason (it cannot count what it cannot read).

The CRDs check the quantity grammar, which still lets through what the engine refuses to count
(an exponent beyond 10^64); objects stored before the CRDs checked anything may hold worse."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.dra import context as dra
from rayquota.operator.queue.dra.context import ClaimReading, ClaimSource
from rayquota.operator.ray.builders.pod_resources import pod_requests
from rayquota.queueing import QuantityError, parse_quantity

CONTAINER_LISTS = ("containers", "initContainers")


def quantity_errors(
    kind: str, obj: Mapping[str, Any], claims: ClaimSource | None, *, missing_claim_templates: bool = True
) -> list[str]:
    """Also the DRA claims that cannot be counted (read from the object's namespace in
    ``claims``, the queue's claim source; None: none are read), and, with
    ``missing_claim_templates``, the ResourceClaimTemplates named that do not exist (the webhook
    lets an object be created before its templates; the queue waits for them)."""
    return _quantity_errors(kind, obj, dra.reading_of(claims, obj), missing_claim_templates)


def _quantity_errors(
    kind: str, obj: Mapping[str, Any], reading: ClaimReading | None, missing_claim_templates: bool
) -> list[str]:
    errors: list[str] = []
    for at in ADAPTERS[kind].pod_templates(obj):
        spec = at.template.get("spec") if isinstance(at.template, Mapping) else None
        if not isinstance(spec, Mapping):
            continue
        readable_up_to = len(errors)
        for field in CONTAINER_LISTS:
            containers = spec.get(field)
            for index, container in enumerate(containers if isinstance(containers, list) else []):
                resources = container.get("resources") if isinstance(container, Mapping) else None
                if not isinstance(resources, Mapping):
                    continue
                for amounts in ("requests", "limits"):
                    where = f"{at.path}.spec.{field}[{index}].resources.{amounts}"
                    errors += _unreadable(where, resources.get(amounts))
        errors += _unreadable(f"{at.path}.spec.overhead", spec.get("overhead"))
        if len(errors) == readable_up_to:  # its quantities read: the DeviceClass-backed ones
            errors += dra.backed(spec, pod_requests(spec), at.path, reading).errors
        claims = dra.charges(spec, at.path, reading)
        errors += claims.errors
        errors += [
            f"{at.path}.spec.resourceClaims: ResourceClaimTemplate {name!r} not found in the namespace"
            for name in claims.missing
            if missing_claim_templates
        ]
    return errors


def _unreadable(where: str, amounts: Any) -> list[str]:
    if not isinstance(amounts, Mapping):
        return []
    errors = []
    for name, value in amounts.items():
        try:
            parse_quantity(value)
        except QuantityError as exc:
            errors.append(f"{where}.{name}: {exc}")
    return errors
