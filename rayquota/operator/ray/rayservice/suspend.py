"""``spec.suspend`` on a RayService (KubeRay's top-level suspend):

    serving --suspend: true--> Suspending --everything deleted--> Suspended --suspend: false--> fresh start

Suspending is written before anything is deleted and then finishes whatever ``spec.suspend`` says
meanwhile, so a flip back mid-way never leaves half the objects gone and the status claiming
otherwise. Deleted: both clusters (their per-cluster Services and pods go with them), the
service's own Services, and the Gateway and HTTPRoute. Resuming starts from a new cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rayquota.api.ray_v1 import RayServiceConditionType
from rayquota.operator.core import Result
from rayquota.operator.core.cache.store import Obj, Store
from rayquota.operator.core.timestamps import format_rfc3339
from rayquota.operator.ray.rayservice.serve_service import serve_service_name
from rayquota.operator.ray.rayservice.status import INITIALIZING
from rayquota.operator.ray.rayservice.writes import RayServiceWrites
from rayquota.operator.ray.vocabulary import labels
from rayquota.operator.ray.vocabulary.conditions import is_true, set_condition

Suspending = RayServiceConditionType.SUSPENDING
Suspended = RayServiceConditionType.SUSPENDED
SUSPEND_REQUESTED, SUSPEND_IN_PROGRESS = "SuspendRequested", "SuspendInProgress"
SUSPEND_COMPLETE, RESUMED = "SuspendComplete", "RayServiceResumed"
DELETION_POLL_S = 1.0


@dataclass(frozen=True)
class SuspendOutcome:
    """The reconcile stops here: write this status (if any) and come back per ``result``."""

    status: dict[str, Any] | None
    result: Result | None


class SuspendHandler:
    def __init__(self, writes: RayServiceWrites, clusters: Store, services: Store) -> None:
        self.writes = writes
        self.clusters = clusters
        self.services = services

    async def handle(
        self, service: Mapping[str, Any], children: list[Obj], now: datetime
    ) -> SuspendOutcome | None:
        """None when the service is not (being) suspended and the reconcile goes on."""
        status = dict(service.get("status") or {})
        conditions = status.get("conditions") or []
        wants_suspend = bool(service["spec"].get("suspend"))
        stamp = format_rfc3339(now)

        def with_conditions(*changes: tuple[str, bool, str, str]) -> dict[str, Any]:
            updated = [dict(c) for c in conditions]
            for type_, value, reason, message in changes:
                updated = set_condition(updated, type_, value, reason, message, now=stamp)
            kept = {
                k: v for k, v in status.items() if k not in ("activeServiceStatus", "pendingServiceStatus")
            }
            return {**kept, "conditions": updated, "numServeEndpoints": 0, "serviceStatus": None}

        ready_false = (RayServiceConditionType.READY.value, False)
        if is_true(conditions, Suspended):
            if wants_suspend:
                return SuspendOutcome(None, None)
            self.writes.event(service, "Resumed", "spec.suspend is false: starting from a new cluster")
            return SuspendOutcome(
                with_conditions(
                    (Suspended, False, RESUMED, "spec.suspend is false"),
                    (*ready_false, INITIALIZING, "resuming from suspend"),
                ),
                Result(requeue_after_s=0.0),
            )
        if not is_true(conditions, Suspending):
            if not wants_suspend:
                return None
            self.writes.event(
                service, "Suspending", "spec.suspend is true: deleting the clusters and Services"
            )
            return SuspendOutcome(
                with_conditions(
                    (Suspending, True, SUSPEND_REQUESTED, "deleting everything the service owns"),
                    (*ready_false, SUSPEND_IN_PROGRESS, "the RayService is suspending"),
                    (
                        RayServiceConditionType.UPGRADE_IN_PROGRESS.value,
                        False,
                        SUSPEND_IN_PROGRESS,
                        "the RayService is suspending",
                    ),
                ),
                Result(requeue_after_s=0.0),
            )
        if await self._delete_everything(service, children):
            return SuspendOutcome(None, Result(requeue_after_s=DELETION_POLL_S))
        self.writes.event(service, "Suspended", "the clusters, Services, Gateway and HTTPRoute are deleted")
        status_after = with_conditions(
            (Suspending, False, SUSPEND_COMPLETE, "everything the service owned is deleted"),
            (Suspended, True, SUSPEND_COMPLETE, "everything the service owned is deleted"),
            (*ready_false, SUSPEND_COMPLETE, "the RayService is suspended"),
        )
        status_after["conditions"] = [
            c for c in status_after["conditions"] if c["type"] != RayServiceConditionType.ROLLBACK_IN_PROGRESS
        ]
        return SuspendOutcome(status_after, Result(requeue_after_s=0.0))

    async def _delete_everything(self, service: Mapping[str, Any], children: list[Obj]) -> bool:
        """Delete what is left; True while something still exists."""
        meta = service["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        remaining = False
        for cluster in children:
            remaining = True
            if not cluster["metadata"].get("deletionTimestamp"):
                await self.writes.delete_cluster(
                    service, namespace, cluster["metadata"]["name"], "suspending"
                )
        for service_name in (labels.head_service_name(name), serve_service_name(service)):
            if self.services.get(namespace, service_name) is not None:
                remaining = True
                await self.writes.delete_service(namespace, service_name)
        remaining |= await self.writes.delete_gateway_objects(namespace, name)
        return remaining
