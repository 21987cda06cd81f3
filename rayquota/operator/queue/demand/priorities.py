"""A queued object's priority, resolved as Kueue's job framework does (``ExtractPriority``):

1. the WorkloadPriorityClass its label names (``rayquota.io/priority-class`` or Kueue's
   ``kueue.x-k8s.io/priority-class``);
2. else the pod PriorityClass (``scheduling.k8s.io``) named by the first of its pod templates
   that names one (a Ray object's head template, then its worker groups', in order);
3. else the cluster's default PriorityClass (``globalDefault: true``; of several, the lowest);
4. else 0.

A class that does not exist (yet) counts 0 and is looked up again at the next reconcile. The
Workload records which class it was, in Kueue's words: ``priorityClassName`` with
``priorityClassSource`` (rayquota.io, Kueue v1beta1's field), ``priorityClassRef`` in
Kueue v1beta2 (:mod:`kueue_shapes`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rayquota.operator.core.cache.informer import DELETED

WORKLOAD_PRIORITY_CLASS_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_CLASS_SOURCE = "scheduling.k8s.io/priorityclass"


@dataclass(frozen=True)
class ResolvedPriority:
    value: int
    class_name: str | None = None
    source: str | None = None
    """:data:`WORKLOAD_PRIORITY_CLASS_SOURCE` or :data:`POD_PRIORITY_CLASS_SOURCE` with a class."""

    def workload_spec(self) -> dict[str, Any]:
        """The Workload's ``priority``, ``priorityClassName`` and ``priorityClassSource``."""
        spec: dict[str, Any] = {"priority": self.value}
        if self.class_name:
            spec["priorityClassName"] = self.class_name
            if self.source == POD_PRIORITY_CLASS_SOURCE:
                spec["priorityClassSource"] = self.source
        return spec


@dataclass(frozen=True)
class _PodClass:
    value: int
    global_default: bool


@dataclass
class PriorityClasses:
    """The values of WorkloadPriorityClasses and of pod PriorityClasses (fed by their informers)."""

    workload_classes: dict[str, int] = field(default_factory=dict)
    pod_classes: dict[str, _PodClass] = field(default_factory=dict)

    def on_workload_class(self, event: str, obj: Mapping[str, Any], _old: Mapping[str, Any] | None) -> None:
        name = str(obj["metadata"]["name"])
        if event == DELETED:
            self.workload_classes.pop(name, None)
        else:
            self.workload_classes[name] = int(obj.get("value") or 0)

    def on_pod_class(self, event: str, obj: Mapping[str, Any], _old: Mapping[str, Any] | None) -> None:
        name = str(obj["metadata"]["name"])
        if event == DELETED:
            self.pod_classes.pop(name, None)
        else:
            self.pod_classes[name] = _PodClass(int(obj.get("value") or 0), obj.get("globalDefault") is True)

    def workload_class_value(self, name: str) -> int | None:
        return self.workload_classes.get(name)

    def _default_pod_class(self) -> str | None:
        defaults = [(c.value, name) for name, c in self.pod_classes.items() if c.global_default]
        return min(defaults)[1] if defaults else None

    def resolve(
        self, workload_class: str | None, pod_templates: Iterable[Mapping[str, Any]]
    ) -> ResolvedPriority:
        """Kueue's order (module docstring): the label's WorkloadPriorityClass, the templates'
        PriorityClass, the default PriorityClass, 0."""
        if workload_class:
            value = self.workload_classes.get(workload_class, 0)
            return ResolvedPriority(value, workload_class, WORKLOAD_PRIORITY_CLASS_SOURCE)
        named = next(
            (
                str(name)
                for template in pod_templates
                if (name := ((template.get("spec") or {}).get("priorityClassName")))
            ),
            None,
        )
        pod_class = named or self._default_pod_class()
        if pod_class is None:
            return ResolvedPriority(0)
        known = self.pod_classes.get(pod_class)
        return ResolvedPriority(known.value if known else 0, pod_class, POD_PRIORITY_CLASS_SOURCE)
