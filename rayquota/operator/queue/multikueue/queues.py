"""Which LocalQueues dispatch to worker clusters: those whose ClusterQueue names a MultiKueue
AdmissionCheck that is Active (a MultiKueue controller runs). Read off the queue integration's
caches; the webhook defaults ``spec.managedBy`` of an object created in such a queue, as Kueue's
does, so a manifest written for one cluster is dispatched unchanged."""

from __future__ import annotations

from dataclasses import dataclass

from rayquota.api.multikueue_v1alpha1 import MULTIKUEUE_CONTROLLER
from rayquota.operator.core import Informer
from rayquota.operator.queue.admission import converter


@dataclass(frozen=True)
class DispatchingQueues:
    local_queues: Informer
    cluster_queues: Informer
    checks: Informer

    def dispatches(self, namespace: str, local_queue: str) -> bool:
        found = self.local_queues.store.get(namespace, local_queue)
        if found is None:
            return False
        cluster_queue = self.cluster_queues.store.get(
            "", str((found.get("spec") or {}).get("clusterQueue") or "")
        )
        if cluster_queue is None:
            return False
        for rule in converter.admission_check_rules(cluster_queue.get("spec") or {}):
            check = self.checks.store.get("", rule.name)
            if check is None:
                continue
            parsed = converter.admission_check(check)
            if parsed.controller_name == MULTIKUEUE_CONTROLLER and parsed.active:
                return True
        return False
