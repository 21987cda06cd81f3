"""The devices a pod asks for through its ``resourceClaims``, as quota: pure.

As Kueue v0.19.2 counts them (pkg/dra): only claims made from a ResourceClaimTemplate are charged,
per pod (a named ResourceClaim is one allocation the pods share, and is not charged per pod). In
the template's ``spec.devices.requests[]``, an ``exactly`` request of ``allocationMode:
ExactCount`` (the default) charges ``count`` (default 1) devices of its ``deviceClassName`` as the
quota resource that class is mapped to. Refused, naming the field and the value:
``firstAvailable`` alternatives, a request without ``exactly``, ``allocationMode: All``,
``adminAccess: true``, and a device class no mapping covers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rayquota.operator.queue.dra.settings import SETTING, DraSettings

MILLI = 1000

ClaimTemplateLookup = Callable[[str], Mapping[str, Any] | None]
"""A ResourceClaimTemplate of the object's namespace by name (its API body), or None if absent."""


class ClaimError(ValueError):
    """A claim that cannot be counted: the message names the field and the value."""


@dataclass(frozen=True)
class TemplateCharges:
    """What one pod template's claims charge per pod (milli-units), and why it cannot be counted."""

    requests: Mapping[str, int] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    """ResourceClaimTemplates it names that do not exist (yet): it waits for them."""


def devices_per_class(claim_spec: Mapping[str, Any], where: str) -> dict[str, int]:
    """Devices per DeviceClass a claim spec asks for (whole devices), or ClaimError."""
    out: dict[str, int] = {}
    requests = (claim_spec.get("devices") or {}).get("requests") or []
    for index, request in enumerate(requests):
        at = f"{where}.devices.requests[{index}]"
        if request.get("firstAvailable") is not None:
            raise ClaimError(f"{at}.firstAvailable: device selection among alternatives is not supported")
        exactly = request.get("exactly")
        if not isinstance(exactly, Mapping):
            raise ClaimError(f"{at}.exactly: Required value (firstAvailable is not set)")
        if exactly.get("adminAccess") is True:
            raise ClaimError(f"{at}.exactly.adminAccess: true is not supported")
        mode = exactly.get("allocationMode") or "ExactCount"
        if mode == "All":
            raise ClaimError(f"{at}.exactly.allocationMode: 'All' is not supported (the count is not known)")
        if mode != "ExactCount":
            raise ClaimError(f"{at}.exactly.allocationMode: unsupported allocation mode {mode!r}")
        count = exactly.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ClaimError(f"{at}.exactly.count: {count!r} is not a positive whole number")
        device_class = str(exactly.get("deviceClassName") or "")
        if device_class:
            out[device_class] = out.get(device_class, 0) + count
    return out


def template_charges(
    pod_spec: Mapping[str, Any], where: str, settings: DraSettings, claim_template: ClaimTemplateLookup
) -> TemplateCharges:
    """The quota one pod of ``pod_spec`` is charged for its claims (``where``: the template's
    field, for the errors)."""
    claims = pod_spec.get("resourceClaims") or []
    if not claims:
        return TemplateCharges()
    if not settings.integration:
        if settings.reject_when_disabled:
            refusal = f"{where}.spec.resourceClaims: the DRA integration is off (RAYQUOTA_DRA_INTEGRATION)"
            return TemplateCharges(errors=(refusal,))
        return TemplateCharges()
    if not settings.mappings and any(
        isinstance(c, Mapping) and c.get("resourceClaimTemplateName") for c in claims
    ):
        refusal = f"{where}.spec.resourceClaims: asks for DRA devices, and no {SETTING} are configured"
        return TemplateCharges(errors=(refusal,))
    requests: dict[str, int] = {}
    errors: list[str] = []
    missing: list[str] = []
    for index, claim in enumerate(claims):
        name = claim.get("resourceClaimTemplateName") if isinstance(claim, Mapping) else None
        if not name:
            continue
        at = f"{where}.spec.resourceClaims[{index}]"
        body = claim_template(str(name))
        if body is None:
            missing.append(str(name))
            continue
        try:
            counts = devices_per_class(
                ((body.get("spec") or {}).get("spec")) or {}, f"ResourceClaimTemplate {name}: spec.spec"
            )
        except ClaimError as exc:
            errors.append(f"{at}: {exc}")
            continue
        for device_class, count in counts.items():
            resource = settings.lookup(device_class)
            if resource is None:
                errors.append(
                    f"{at}.resourceClaimTemplateName: ResourceClaimTemplate {name} asks for DeviceClass "
                    f"{device_class!r}, which no {SETTING} entry maps to a quota resource"
                )
                continue
            requests[resource] = requests.get(resource, 0) + count * MILLI
    return TemplateCharges(requests, tuple(errors), tuple(missing))
