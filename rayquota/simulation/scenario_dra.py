"""DRA devices in a scenario: a workload class's ``resourceClaims`` charged as the operator
charges them.

The scenario gives Kueue's ``deviceClassMappings`` (same shape as the operator's
``resources.deviceClassMappings``) and the ResourceClaimTemplates by name; a workload class
names them in ``resourceClaims`` (a pod spec's list). What each pod is charged is read by the
operator's own reading (:func:`rayquota.operator.queue.dra.claims.template_charges`), so a
claim the operator would refuse is a scenario error with the same words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.queue.dra.claims import template_charges
from rayquota.operator.queue.dra.settings import DraSettings, mappings_from


class DraScenarioError(ValueError):
    """A DRA field of the scenario that cannot be read; the message names the field and value."""


def dra_settings(raw: Mapping[str, Any]) -> DraSettings:
    """The scenario's ``deviceClassMappings`` (none: no mapping, claims are refused)."""
    mappings = raw.get("deviceClassMappings")
    if mappings is None:
        return DraSettings()
    try:
        return DraSettings(mappings=mappings_from(mappings))
    except ValueError as exc:
        raise DraScenarioError(f"deviceClassMappings: {exc}") from exc


def claim_templates(raw: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """``resourceClaimTemplates``: ResourceClaimTemplate bodies (``metadata.name``, ``spec``)."""
    templates: dict[str, Mapping[str, Any]] = {}
    for index, body in enumerate(raw.get("resourceClaimTemplates") or ()):
        name = (body.get("metadata") or {}).get("name") if isinstance(body, Mapping) else None
        if not isinstance(name, str) or not name:
            raise DraScenarioError(f"resourceClaimTemplates[{index}].metadata.name: {name!r} is not a name")
        templates[name] = body
    return templates


def claim_requests(
    workload_class: Mapping[str, Any],
    where: str,
    settings: DraSettings,
    templates: Mapping[str, Mapping[str, Any]],
) -> dict[str, int]:
    """The quota one pod of the class is charged for its ``resourceClaims`` (milli-units), added
    to its ``requests`` as the operator adds it to the containers' requests."""
    claims = workload_class.get("resourceClaims")
    if not claims:
        return {}
    charges = template_charges({"resourceClaims": claims}, where, settings, templates.get)
    if charges.errors:
        raise DraScenarioError("; ".join(charges.errors))
    if charges.missing:
        raise DraScenarioError(
            f"{where}.spec.resourceClaims: ResourceClaimTemplate(s) {list(charges.missing)} not in "
            "resourceClaimTemplates"
        )
    return dict(charges.requests)
