"""A RayService under quota beside KubeRay's own operator (admission-only mode).

KubeRay's RayService controller copies ``rayClusterConfig.suspend`` into every child it keeps
(active and pending) and writes it back whenever the two differ. So here rayquota never writes
a child's ``spec.suspend``: the gate it lifts and sets is the RayService's own
``rayClusterConfig.suspend`` (Kueue's RayService gate), which KubeRay carries to the children.
Once the first slice is admitted it stays lifted; the clusters KubeRay creates afterwards (an
upgrade's pending cluster, say) are held at their pods instead: the pod webhook gives each of
their pods a scheduling gate, and the pod ungater lifts it, with the flavor's nodeSelector and
tolerations, only as far as the recorded admission covers the pod (``pod_gate.py``). Nothing
is injected into the templates (an edit there would start an upgrade in KubeRay).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rayquota.operator.queue.adapters.protocol import Body, Edit, SuspendGate
from rayquota.operator.queue.adapters.rayservice import RayServiceAdapter
from rayquota.operator.queue.adapters.record_helpers import allocation_of, changed, edited
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.queueing import ResourceFlavor


class BesideKubeRayServiceAdapter(RayServiceAdapter):
    # Lifted by the queue once admitted; a user clearing it before is refused (or re-asserted).
    gate = SuspendGate(("spec", "rayClusterConfig", "suspend"))
    children_held_at_pods = True

    def running_parts(self, obj: Body, children: Sequence[Body]) -> set[str]:
        """The serving cluster, while the gate is lifted: it keeps what it holds. Any other
        child (a pending one) is covered whole or not at all."""
        if self.is_suspended(obj):
            return set()
        active = ((obj.get("status") or {}).get("activeServiceStatus") or {}).get("rayClusterName")
        return {
            str(c["metadata"]["name"])
            for c in children
            if c["metadata"]["name"] == active and not (c.get("spec") or {}).get("suspend")
        }

    def _set_gate(self, obj: Body, value: bool) -> list[Edit]:
        after = edited(obj)
        after["spec"].setdefault("rayClusterConfig", {})["suspend"] = value
        return changed(self.kind, obj, after)

    def suspend(self, obj: Body, children: Sequence[Body]) -> list[Edit]:
        """The RayService alone: KubeRay suspends its children (and deletes their pods)."""
        return self._set_gate(obj, True)

    def run_with(
        self,
        obj: Body,
        children: Sequence[Body],
        admission: AdmittedSlice,
        flavors: Mapping[str, ResourceFlavor],
    ) -> list[Edit]:
        """Lift the RayService's gate once the slice covers one of its clusters; the pods of
        each cluster are let through one by one by the pod ungater."""
        _, allocation = allocation_of(self, obj, children, admission)
        if not any(share.runs for share in allocation.values()):
            return []
        return self._set_gate(obj, False)

    def restore(self, obj: Body, children: Sequence[Body]) -> list[Edit]:
        return []  # nothing was injected: the pods carried the placement
