"""The multi-cluster part of an integration record: how an object of a kind is copied to the
worker cluster that admitted its Workload, how its status comes back, and which later changes
in the manager follow it there. Pure: bodies in, bodies out.

The manager's object carries ``spec.managedBy: kueue.x-k8s.io/multikueue`` (nothing runs it
there); the worker's copy has no ``managedBy`` (the worker's own controllers run it), is born
gated, and carries the labels that tie it to its Workload and to the manager that made it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from rayquota.api.multikueue_v1alpha1 import MULTIKUEUE_CONTROLLER, ORIGIN_LABEL, PREBUILT_WORKLOAD_LABEL
from rayquota.operator.queue import naming
from rayquota.operator.queue.gating import placement

Body = Mapping[str, Any]
# Metadata the API server owns: never copied into a new object.
_SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "ownerReferences",
    "finalizers",
    "selfLink",
    "generateName",
)
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

SpecUpdate = Callable[[Body, Body], "dict[str, Any] | None"]
StatusMirror = Callable[[Body, Body], "dict[str, Any] | None"]


def whole_status(local: Body, remote: Body) -> dict[str, Any] | None:
    """The remote's status, as it is (what KubeRay's objects report is read from it)."""
    return copy.deepcopy(dict(remote.get("status") or {}))


def without_injected_placement(node: Any) -> Any:
    """A copy of ``node`` with every flavor placement the queue injected taken out again: a copy
    runs on the worker's flavors, never on the manager's."""
    if isinstance(node, Mapping):
        out = {k: without_injected_placement(v) for k, v in node.items()}
        annotations = (out.get("metadata") or {}).get("annotations") or {}
        if naming.INJECTED_ANNOTATION in annotations and isinstance(out.get("spec"), MutableMapping):
            placement.restore(out)
        return out
    if isinstance(node, list):
        return [without_injected_placement(v) for v in node]
    return node


@dataclass(frozen=True)
class MultiClusterPart:
    """``spec_update(local, remote)``: the remote's new spec when a change in the manager must
    follow it (None: nothing to do, or the kind is create-once). ``status(local, remote)``: the
    status to write on the manager's object (None: not yet). ``clean_spec``: what a fresh copy's
    spec must lose (fields the API server fills in for the original)."""

    status: StatusMirror = whole_status
    spec_update: SpecUpdate | None = None
    clean_spec: Callable[[MutableMapping[str, Any]], None] | None = None

    @staticmethod
    def managed_by(obj: Body) -> str | None:
        value = (obj.get("spec") or {}).get("managedBy")
        return str(value) if value else None

    def refusal(self, obj: Body) -> str | None:
        """Why the manager may not dispatch this object (it would also run in the manager)."""
        managed_by = self.managed_by(obj)
        if managed_by == MULTIKUEUE_CONTROLLER:
            return None
        return f"spec.managedBy is {managed_by or 'unset'}: it must be {MULTIKUEUE_CONTROLLER}"

    def remote_body(
        self, obj: Body, gate_path: tuple[str, ...], workload_name: str, origin: str
    ) -> dict[str, Any]:
        """The worker's copy: the same name, labels, annotations and spec, gated, without the
        manager's placement, ``managedBy`` or server-owned metadata."""
        meta = {k: copy.deepcopy(v) for k, v in obj["metadata"].items() if k not in _SERVER_METADATA}
        annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != _LAST_APPLIED}
        if annotations:
            meta["annotations"] = annotations
        else:
            meta.pop("annotations", None)
        meta["labels"] = {
            **(meta.get("labels") or {}),
            ORIGIN_LABEL: origin,
            PREBUILT_WORKLOAD_LABEL: workload_name,
        }
        spec = without_injected_placement(obj.get("spec") or {})
        spec.pop("managedBy", None)
        if self.clean_spec is not None:
            self.clean_spec(spec)
        body: dict[str, Any] = {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "metadata": meta,
            "spec": spec,
        }
        node: MutableMapping[str, Any] = body
        for step in gate_path[:-1]:
            node = node.setdefault(step, {})
        node[gate_path[-1]] = True
        return body


def owned_by(remote: Body, origin: str, workload_name: str) -> bool:
    """Is this worker object the copy this manager made for this Workload?"""
    found = remote["metadata"].get("labels") or {}
    return found.get(ORIGIN_LABEL) == origin and found.get(PREBUILT_WORKLOAD_LABEL) == workload_name


def gate_free(cluster_spec: Body) -> dict[str, Any]:
    """A RayCluster spec as its user wrote it: no injected placement, no gate."""
    out: dict[str, Any] = without_injected_placement(cluster_spec)
    out.pop("suspend", None)
    return out
