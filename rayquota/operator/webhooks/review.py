"""What the webhooks decide, as pure functions of the AdmissionReview request and the
operator's caches. Each kind's gate is the one its integration record names."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.api.multikueue_v1alpha1 import MULTIKUEUE_CONTROLLER
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.adapters.capabilities import PlansWithinCaps
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.demand import topology_request
from rayquota.operator.queue.dra.context import ClaimSource
from rayquota.operator.queue.gating.gate import QueueGate, recorded_admission
from rayquota.operator.queue.kueue import namespace_selection
from rayquota.operator.queue.objects import QueueObjects, accounted_elsewhere
from rayquota.operator.queue.workloads.template_quantities import quantity_errors
from rayquota.operator.ray.raycluster.security_fields import object_refusals
from rayquota.operator.webhooks.shapes import type_errors
from rayquota.queueing import QuantityError, parse_quantity

Body = Mapping[str, Any]
QUOTA_FIELDS = ("nominalQuota", "borrowingLimit", "lendingLimit")
Dispatched = Callable[[str, str], bool]


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    message: str = ""
    patch: tuple[dict[str, Any], ...] = ()
    warning: str | None = None


ALLOW = Verdict(True)


def topology_errors(kind: str, obj: Body) -> list[str]:
    """Kueue's topology annotations on the object's pod templates (its record names where they
    are) that cannot be read."""
    errors: list[str] = []
    for at in ADAPTERS[kind].pod_templates(obj):
        errors += topology_request.errors(at.template, at.path, at.hosts)
    return errors


def _type_refusal(kind: str, obj: Body) -> Verdict | None:
    """Fields of the wrong type (the schema is checked after the mutating webhook)."""
    errors = type_errors(kind, obj)
    return Verdict(False, f"{_name(kind, obj)}: " + "; ".join(errors)) if errors else None


def _topology_refusal(kind: str, obj: Body, claims: ClaimSource | None) -> Verdict | None:
    """Topology annotations or resource quantities in its pod templates that cannot be read,
    DRA claims included (read from ``claims``; asked once the field types are known to be right)."""
    errors = topology_errors(kind, obj) + quantity_errors(kind, obj, claims, missing_claim_templates=False)
    if not errors:
        return None
    return Verdict(False, f"{_name(kind, obj)}: " + "; ".join(errors))


def _security_refusal(kind: str, obj: Body, allowed: Collection[str]) -> Verdict | None:
    """Fields asking for security rayquota does not provide (the reconcilers refuse them too);
    ``allowed``: the gated fields whose feature gate is on (security_fields.allowed_fields)."""
    errors = object_refusals(kind, obj, allowed)
    return Verdict(False, f"{_name(kind, obj)}: " + "; ".join(errors)) if errors else None


def _name(kind: str, obj: Body) -> str:
    return f"{kind} {obj['metadata'].get('namespace')}/{obj['metadata'].get('name')}"


def mutate(
    kind: str,
    obj: Body,
    objects: QueueObjects,
    dispatched: Dispatched | None = None,
    queue_exists: bool = True,
    allowed: Collection[str] = (),
) -> Verdict:
    """CREATE of a queued object: what its kind refuses in a queue is refused, with the field
    and the value (topology annotations that cannot be read too); otherwise it is born suspended
    (the gate its record names: on the object, or on the RayService's cluster template so every
    child is born gated). In a queue that dispatches to worker clusters (``dispatched``:
    namespace, LocalQueue), ``spec.managedBy`` names MultiKueue unless it is set (Kueue's
    defaulting): nothing of it runs here. ``queue_exists``: whether its LocalQueue exists (a
    warning names a missing one: a typo in the label is said at ``kubectl apply`` time).
    ``allowed``: the gated security fields whose feature gate is on (``networkPolicy`` with
    RayClusterNetworkPolicy); the others are refused, naming the field."""
    refused = _type_refusal(kind, obj) or _security_refusal(kind, obj, allowed)
    if refused is not None:
        return refused
    queue = objects.queue_name(kind, obj)
    if queue is None:
        return ALLOW
    refused = _topology_refusal(kind, obj, objects.claims)
    if refused is not None:
        return refused
    record = objects.adapters[kind]
    refusal = record.creation_refusal(obj, queue)
    if refusal is not None:
        return Verdict(False, refusal)
    ops: list[dict[str, Any]] = []
    spec = obj.get("spec")
    namespace = str(obj["metadata"].get("namespace") or "")
    if (
        record.multicluster is not None
        and isinstance(spec, Mapping)
        and not spec.get("managedBy")
        and dispatched is not None
        and dispatched(namespace, queue)
    ):
        ops.append({"op": "add", "path": "/spec/managedBy", "value": MULTIKUEUE_CONTROLLER})
    gate = None if record.gate.is_set(obj) else record.gate.set_patch(obj)
    if gate is not None:
        ops.append(gate)
    warning = queue_warning(namespace, queue, queue_exists, gated=gate is not None)
    if not ops and warning is None:
        return ALLOW
    return Verdict(True, patch=tuple(ops), warning=warning)


def queue_warning(namespace: str, queue: str, queue_exists: bool, *, gated: bool) -> str | None:
    """The admission warning of a queued object's CREATE: a LocalQueue that does not exist is
    named (the object waits until one by that name is created), else what the gate means."""
    if not queue_exists:
        return (
            f"LocalQueue {namespace}/{queue} does not exist: the object stays suspended until a "
            "LocalQueue of that name is created (check the queue-name label)"
        )
    return "suspended until its queue admits it" if gated else None


def _gate_value(kind: str, obj: Body) -> Any:
    node: Any = obj
    for step in ADAPTERS[kind].gate.path:
        node = node.get(step) if isinstance(node, Mapping) else None
    return node


def carry_gate_over(kind: str, obj: Body, old: Body, objects: QueueObjects) -> Verdict:
    """UPDATE of a queued object whose new body leaves the gate out (``kubectl replace`` of the
    manifest as the user wrote it, a GitOps tool that replaces, a client's PUT): the gate the old
    object had is carried over. Only an explicit ``false`` is an attempt to clear it, which the
    validating webhook judges (:func:`validate_gate`)."""
    if objects.queue_name(kind, obj) is None:
        return ALLOW
    gate = ADAPTERS[kind].gate
    if not gate.is_set(old) or _gate_value(kind, obj) is not None:
        return ALLOW
    patch = gate.set_patch(obj)
    if patch is None:
        return ALLOW
    return Verdict(
        True, patch=(patch,), warning=f"{gate.field} carried over from the stored object (the queue's gate)"
    )


def validate_gate(
    kind: str,
    obj: Body,
    old: Body | None,
    objects: QueueObjects,
    gate: QueueGate,
    allowed: Collection[str] = (),
) -> Verdict:
    """UPDATE that clears a gate: allowed only as far as the recorded admission covers; and no
    queued object gets topology annotations that cannot be read, nor a security field whose
    feature gate is off (``allowed``: those whose gate is on)."""
    if old is not None and objects.queue_name(kind, obj) is not None:
        refused = (
            _type_refusal(kind, obj)
            or _security_refusal(kind, obj, allowed)
            or _topology_refusal(kind, obj, objects.claims)
        )
        if refused is not None:
            return refused
    suspend = objects.adapters[kind].gate
    if old is None or not suspend.is_set(old) or suspend.is_set(obj):
        return ALLOW
    name = f"{kind} {obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
    record = objects.adapters[kind]
    if isinstance(record, PlansWithinCaps) and accounted_elsewhere(kind, obj):
        if _held_at_pods(obj, objects):
            return ALLOW  # its parent's operator writes its suspend; its pods are held instead
        caps = gate.caps_for(obj)
        if caps is not None and not record.may_start(caps):
            return Verdict(
                False,
                f"{name} belongs to a queued object whose admitted quota does not cover it; "
                "spec.suspend is cleared by the queue integration when it is admitted",
            )
        return ALLOW
    queued = objects.queued(kind, dict(obj))
    if queued is None:
        return ALLOW
    if suspend.cleared_by_queue_only:
        return Verdict(False, f"{name}: {suspend.field} is the queue's gate and stays set")
    if recorded_admission(objects.workload(queued.workload)) is None:
        return Verdict(
            False,
            f"{name} is waiting in queue {objects.queue_name(kind, obj)} and is not admitted; "
            f"{suspend.field} is cleared by the queue integration when quota is reserved "
            f"(see: rayquota explain {kind.lower()}/{obj['metadata']['name']})",
        )
    return ALLOW


def _held_at_pods(cluster: Body, objects: QueueObjects) -> bool:
    owner = objects.queued_owner_of_cluster(cluster)
    return owner is not None and owner.adapter.children_held_at_pods


def resource_group_errors(obj: Body) -> list[str]:
    """What the CRD schema cannot say of a ClusterQueue's or a Cohort's ``spec.resourceGroups``
    (the same shape in both): each flavor lists exactly the group's coveredResources, no resource
    is covered by two groups, no flavor appears twice in one group, and each quota is a quantity
    (said in words; the schema would answer with its regular expression)."""
    errors: list[str] = []
    covered_by: dict[str, int] = {}
    for gi, group in enumerate((obj.get("spec") or {}).get("resourceGroups") or []):
        covered = [str(r) for r in group.get("coveredResources") or []]
        for resource in covered:
            if resource in covered_by:
                errors.append(
                    f"spec.resourceGroups[{gi}].coveredResources: {resource} is already covered by "
                    f"spec.resourceGroups[{covered_by[resource]}]"
                )
            covered_by.setdefault(resource, gi)
        seen: set[str] = set()
        for fi, flavor in enumerate(group.get("flavors") or []):
            where = f"spec.resourceGroups[{gi}].flavors[{fi}]"
            if flavor.get("name") in seen:
                errors.append(f"{where}.name: flavor {flavor.get('name')} appears twice in the group")
            seen.add(str(flavor.get("name")))
            names = [str(r.get("name")) for r in flavor.get("resources") or []]
            errors += _quota_quantity_errors(flavor, where)
            if sorted(names) != sorted(covered):
                errors.append(
                    f"{where}.resources: lists {sorted(names)}, coveredResources is {sorted(covered)}"
                )
    return errors


def _quota_quantity_errors(flavor: Body, where: str) -> list[str]:
    errors: list[str] = []
    for ri, resource in enumerate(flavor.get("resources") or []):
        for field in QUOTA_FIELDS:
            if resource.get(field) is None:
                continue
            try:
                parse_quantity(resource[field])
            except QuantityError as exc:
                errors.append(f"{where}.resources[{ri}].{field}: {exc}")
    return errors


def _quota_object_errors(kind: str, obj: Body, convert: Callable[[Body], object]) -> list[str]:
    """A ClusterQueue's or a Cohort's refusals: fields of the wrong type first (the check is also
    called as a mutating webhook, before the schema), then its resource groups, then what the
    engine's converter cannot read."""
    errors = type_errors(kind, obj) or resource_group_errors(obj)
    if not errors:
        try:
            convert(obj)
        except converter.ConversionError as exc:
            errors.append(str(exc))
    return errors


def validate_cluster_queue(obj: Body) -> Verdict:
    errors = _quota_object_errors("ClusterQueue", obj, converter.cluster_queue)
    if errors:
        return Verdict(False, f"invalid ClusterQueue {obj['metadata'].get('name')}: " + "; ".join(errors))
    return Verdict(True, warning=namespace_selection.unset_selector_warning(obj))


def validate_cohort(obj: Body) -> Verdict:
    """A Cohort's quota is checked as a ClusterQueue's (:func:`resource_group_errors`)."""
    errors = _quota_object_errors("Cohort", obj, converter.cohort)
    if errors:
        return Verdict(False, f"invalid Cohort {obj['metadata'].get('name')}: " + "; ".join(errors))
    return ALLOW
