"""The RayService controller: KubeRay's RayService on the operator core.

One reconcile reads the service, its child clusters and their head pods from the caches, asks
Serve (on each ready cluster's dashboard) how the applications are, takes the one cluster move the
planner decides, runs the incremental loop or the NewCluster switch, and writes the whole status.
The decisions live in rayservice_plan / rayservice_incremental / rayservice_status; the writes in
rayservice_writes. Serve has no watch, so a service is looked at again on a short timer while it
changes and on a slower health poll while it is at rest.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from rayquota.operator.core import Manager, ObjectKey, Result, label_indexer, resources
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.core.finalizers import set_finalizer
from rayquota.operator.ray.builders.auth_token import AuthTokens
from rayquota.operator.ray.builders.podspec import SERVE_LABEL
from rayquota.operator.ray.dashboard_api.resolver import DashboardResolver
from rayquota.operator.ray.raycluster.plan import is_ready, node_type
from rayquota.operator.ray.raycluster.reconciler import warn_unimplemented_fields
from rayquota.operator.ray.raycluster.security_fields import allowed_fields
from rayquota.operator.ray.rayservice.cluster import (
    RAYSERVICE_KIND,
    build_cluster,
    new_cluster_name,
    updated_cluster,
)
from rayquota.operator.ray.rayservice.plan import (
    ClusterChange,
    ClusterStep,
    ServiceView,
    decide_clusters,
    deletion_delay_s,
    leftovers,
)
from rayquota.operator.ray.rayservice.serve_rounds import ServeRounds
from rayquota.operator.ray.rayservice.status import (
    GATEWAY_CLASS_MISSING,
    UPGRADE_DISABLED,
    VALIDATION_FAILED,
    ClusterSeen,
    Observed,
    is_rolling_back,
    service_status,
)
from rayquota.operator.ray.rayservice.suspend import SuspendHandler
from rayquota.operator.ray.rayservice.traffic import HEALTH_POLL_S, ReconcilePass, ServeTraffic
from rayquota.operator.ray.rayservice.validation import upgrade_options, validate_rayservice
from rayquota.operator.ray.rayservice.writes import RayServiceWrites, build_service_services
from rayquota.operator.ray.settings import RaySettings
from rayquota.operator.ray.vocabulary import labels
from rayquota.operator.ray.vocabulary.conditions import find

log = logging.getLogger(__name__)

SERVICE_INDEX = "rayservice"
# KubeRay's finalizer on a RayService; rayquota puts none (it relies on owner references) and
# removes KubeRay's, so a RayService moved from KubeRay is deleted.
KUBERAY_FINALIZER = "ray.io/rayservice-finalizer"
CLUSTER_INDEX = "raycluster"


def parent_service(obj: Mapping[str, Any]) -> list[ObjectKey]:
    """Mapper: the RayService a child cluster or Service came from."""
    obj_labels = obj["metadata"].get("labels") or {}
    if obj_labels.get(labels.ORIGINATED_FROM_CRD) != RAYSERVICE_KIND:
        return []
    name = obj_labels.get(labels.ORIGINATED_FROM_CR_NAME)
    return [ObjectKey(str(obj["metadata"].get("namespace") or ""), str(name))] if name else []


def already_reported(service: Mapping[str, Any], condition_type: str, reason: str, message: str) -> bool:
    """The stored condition says this already: its event was recorded then (the recorder's per-object
    budget is small, so a state that persists is reported once, not on every pass)."""
    stored = find((service.get("status") or {}).get("conditions"), condition_type)
    return stored is not None and stored.get("reason") == reason and stored.get("message") == message


def service_index(obj: Mapping[str, Any]) -> list[str]:
    return [f"{key.namespace}/{key.name}" for key in parent_service(obj)]


class RayServiceReconciler:
    def __init__(
        self, manager: Manager, config: RaySettings, resolver: DashboardResolver, tokens: AuthTokens
    ) -> None:
        self.manager = manager
        self.config = config
        self.writes = RayServiceWrites(manager, resolver, config.dashboard_timeout_s, tokens)
        self.services = manager.informer(resources.RAYSERVICES)
        self.clusters = manager.informer(resources.RAYCLUSTERS, indexers={SERVICE_INDEX: service_index})
        self.pods = manager.informer(
            resources.PODS,
            label_selector=labels.RAY_CLUSTER,
            indexers={CLUSTER_INDEX: label_indexer(labels.RAY_CLUSTER)},
        )
        self.k8s_services = manager.informer(
            resources.SERVICES,
            label_selector=f"{labels.ORIGINATED_FROM_CRD}={RAYSERVICE_KIND}",
            indexers={SERVICE_INDEX: service_index},
        )
        self.suspend = SuspendHandler(self.writes, self.clusters.store, self.k8s_services.store)
        self.controller = manager.controller("rayservice", self.reconcile)
        # Serve health checks and deploys run off the workers; an answer re-queues its service.
        self.rounds = ServeRounds(self.writes, self.controller.enqueue)
        self.traffic = ServeTraffic(self.writes, self.head_pod, self.k8s_services.store, self.rounds)
        self.controller.watch(self.services)
        self.controller.watch(self.clusters, parent_service)
        self.controller.watch(self.k8s_services, parent_service)
        self.controller.watch(self.pods, self._pod_owner_service)

    async def close(self) -> None:
        await self.rounds.close()
        await self.writes.close()

    def _pod_owner_service(self, pod: Obj) -> list[ObjectKey]:
        cluster_name = (pod["metadata"].get("labels") or {}).get(labels.RAY_CLUSTER)
        cluster = self.clusters.store.get(str(pod["metadata"].get("namespace") or ""), str(cluster_name))
        return parent_service(cluster) if cluster is not None else []

    def children(self, service: Mapping[str, Any]) -> list[Obj]:
        meta = service["metadata"]
        return [
            c
            for c in self.clusters.store.by_index(SERVICE_INDEX, f"{meta['namespace']}/{meta['name']}")
            if any(ref.get("uid") == meta.get("uid") for ref in c["metadata"].get("ownerReferences") or [])
        ]

    def head_pod(self, cluster: Mapping[str, Any]) -> Obj | None:
        meta = cluster["metadata"]
        for pod in self.pods.store.by_index(CLUSTER_INDEX, f"{meta['namespace']}/{meta['name']}"):
            if node_type(pod) == labels.HEAD_NODE and not pod["metadata"].get("deletionTimestamp"):
                return pod
        return None

    # --- the reconcile ----------------------------------------------------------------------------

    async def reconcile(self, key: ObjectKey) -> Result | None:
        cached = self.services.store.get_key(key)
        if cached is None or cached["metadata"].get("deletionTimestamp"):
            self.rounds.forget(key)
        if cached is None:
            return None
        if cached["metadata"].get("deletionTimestamp"):
            # Children are owned: the garbage collector removes them once the service is gone.
            # KubeRay's finalizer (a RayService created under KubeRay) waits for the same.
            if KUBERAY_FINALIZER in (cached["metadata"].get("finalizers") or []):
                path = resources.RAYSERVICES.path(cached["metadata"]["namespace"], str(key.name))
                await set_finalizer(self.manager.client, path, cached, KUBERAY_FINALIZER, present=False)
            return None
        if labels.managed_by_other_controller(cached) or self.manager.status.is_stale(cached):
            return None
        service = copy.deepcopy(cached)
        warn_unimplemented_fields(self.manager, service)
        suspended = await self.suspend.handle(service, self.children(service), datetime.now(UTC))
        if suspended is not None:
            self.rounds.forget(key)
            if suspended.status is not None:
                await self.manager.status.write(resources.RAYSERVICES, cached, suspended.status)
            return suspended.result
        status = copy.deepcopy(service.get("status") or {})
        current = ReconcilePass(service, status, *self._recorded_clusters(service))
        problems = validate_rayservice(service, allowed_fields(self.config.feature_gates.enabled))
        if problems:
            message = "; ".join(problems)
            if not already_reported(service, "Ready", VALIDATION_FAILED, message):
                self.writes.event(service, "InvalidRayServiceSpec", message, warning=True)
            current.blocked = (VALIDATION_FAILED, message)
        else:
            await self._step(current)
        await self._write_status(cached, current)
        self.rounds.forget(
            key, [c["metadata"]["name"] for c in (current.active, current.pending) if c is not None]
        )
        if current.requeue_s is not None:
            return Result(requeue_after_s=current.requeue_s)
        # The Serve applications' health makes no watch events: polled, behind the work in motion.
        return Result(requeue_after_s=HEALTH_POLL_S, poll=True) if current.active is not None else None

    def _recorded_clusters(self, service: Mapping[str, Any]) -> tuple[Obj | None, Obj | None]:
        status = service.get("status") or {}
        by_name = {c["metadata"]["name"]: c for c in self.children(service)}
        active_name = (status.get("activeServiceStatus") or {}).get("rayClusterName")
        pending_name = (status.get("pendingServiceStatus") or {}).get("rayClusterName")
        return by_name.get(active_name), by_name.get(pending_name)

    async def _step(self, current: ReconcilePass) -> None:
        service = current.service
        current.rolling_back = is_rolling_back(service)
        await self._cleanup_leftovers(current)
        pending_name = (current.status.get("pendingServiceStatus") or {}).get("rayClusterName") or ""
        view = ServiceView(
            service, current.active, current.pending, pending_name, current.rolling_back, self.config.version
        )
        decision = decide_clusters(view)
        if not await self._apply_cluster_step(current, decision.step, decision.change, decision.message):
            return
        await self.traffic.observe(current)
        self._note_quota_wait(current)
        if self._promotes(current):
            self.traffic.promote(current)
        if current.incremental and current.active is not None:
            # A first cluster promoted just now gets its Gateway and HTTPRoute in this same pass,
            # so Ready never shows before the route does.
            await self.traffic.incremental(current, self._retire)
        serving = current.active
        if serving is not None:
            for wanted in build_service_services(service, serving):
                live = self.k8s_services.store.get(
                    wanted["metadata"]["namespace"], wanted["metadata"]["name"]
                )
                await self.writes.ensure_service(service, wanted, live)

    def _promotes(self, current: ReconcilePass) -> bool:
        """The pending cluster serves and takes over whole: always under NewCluster; under an
        incremental upgrade only as the first cluster (later ones move traffic step by step)."""
        pending = current.pending
        if pending is None or not self.traffic.serves(current, pending):
            return False
        return not current.incremental or current.active is None

    def _note_quota_wait(self, current: ReconcilePass) -> None:
        """Hold an upgrade the queue holds, and say why: the pending cluster is still gated (its
        slice is not admitted), or an admitted service's scale-up slice waits for quota."""
        pending = current.pending
        verdict = self.manager.gate.queue_condition("RayService", current.service)
        if pending is None or verdict is None:
            return
        if (pending.get("spec") or {}).get("suspend"):
            name = pending["metadata"]["name"]
            if verdict.admitted and not verdict.slice_waiting:
                # Admitted with no waiting slice on record: the queue has yet to judge the new
                # cluster's slice, or is lifting its gate. The admission's words are no reason.
                why = f"RayCluster {name} waits for the queue to lift its gate"
            else:
                why = f"RayCluster {name} waits for quota: {verdict.message}"
        elif verdict.slice_waiting:
            why = f"the upgrade's next slice waits for quota: {verdict.message}"
        else:
            return
        current.held_by_quota = True
        current.waiting_for = current.waiting_for or why

    async def _apply_cluster_step(
        self, current: ReconcilePass, step: ClusterStep, change: ClusterChange, message: str
    ) -> bool:
        """Take the planner's cluster move; False when the rest of the reconcile must wait."""
        service, status = current.service, current.status
        incremental = current.incremental
        if step == ClusterStep.PREPARE_PENDING:
            if incremental and current.active is not None:
                class_name = upgrade_options(service).gateway_class_name
                if not await self.writes.gateway_class_exists(class_name):
                    message = (
                        f"GatewayClass {class_name!r} not found: install it (and the Gateway API) to upgrade"
                    )
                    if not already_reported(service, "UpgradeInProgress", GATEWAY_CLASS_MISSING, message):
                        self.writes.event(service, GATEWAY_CLASS_MISSING, message, warning=True)
                    current.upgrade_blocked = (GATEWAY_CLASS_MISSING, message)
                    current.soon(HEALTH_POLL_S)
                    return True
            name = new_cluster_name(service["metadata"]["name"])
            status["pendingServiceStatus"] = {"rayClusterName": name}
            log.info("RayService %s/%s: %s: RayCluster %s", *ObjectKey.of(service), message, name)
            current.soon(0.0)
            return False
        if step == ClusterStep.CREATE_PENDING:
            name = status["pendingServiceStatus"]["rayClusterName"]
            manifest = build_cluster(
                service,
                name,
                self.config.version,
                autoscale_from_min=incremental and current.active is not None,
            )
            verdict = self.manager.gate.may_run(RAYSERVICE_KIND, service, part=name)
            if verdict is not None and not verdict.open:
                # A queued service's new cluster is born gated, whatever rayClusterConfig says:
                # the queue lifts the gate once its slice is admitted and its placement is in.
                manifest["spec"]["suspend"] = True
            await self.writes.create_cluster(service, manifest)
            current.soon()
            return False
        if step in (ClusterStep.UPDATE_ACTIVE, ClusterStep.UPDATE_PENDING):
            live = current.active if step == ClusterStep.UPDATE_ACTIVE else current.pending
            assert live is not None
            await self.writes.replace_cluster(
                service, updated_cluster(live, service, change, self.config.version), change.value
            )
            current.soon()
        elif step in (ClusterStep.REPLACE_PENDING, ClusterStep.DROP_PENDING):
            assert current.pending is not None
            await self._retire(current.pending, message)
            status.pop("pendingServiceStatus", None)
            current.pending = None
            current.soon(0.0)
            return step == ClusterStep.DROP_PENDING
        elif step == ClusterStep.START_ROLLBACK:
            current.rolling_back = True
            self.writes.event(
                service,
                "RollbackStarted",
                f"{message}: traffic and capacity return to "
                f"{current.active['metadata']['name'] if current.active else 'the active cluster'}",
            )
        elif step == ClusterStep.CANCEL_ROLLBACK:
            current.rolling_back = False
            self.writes.event(service, "RollbackCancelled", message)
        elif step == ClusterStep.REPORT_UPGRADE_DISABLED:
            if not already_reported(service, "UpgradeInProgress", UPGRADE_DISABLED, message):
                self.writes.event(service, UPGRADE_DISABLED, message)
            current.upgrade_blocked = (UPGRADE_DISABLED, message)
        return True

    async def _retire(self, cluster: Mapping[str, Any], why: str) -> None:
        """A cluster that never served, or serves no more: delete it now (the owner is in its labels)."""
        meta = cluster["metadata"]
        owner = self.services.store.get(meta["namespace"], meta["labels"][labels.ORIGINATED_FROM_CR_NAME])
        await self.writes.delete_cluster(owner or cluster, meta["namespace"], meta["name"], why)

    async def _cleanup_leftovers(self, current: ReconcilePass) -> None:
        service = current.service
        active_name = current.active["metadata"]["name"] if current.active else ""
        pending_name = (current.status.get("pendingServiceStatus") or {}).get("rayClusterName") or ""
        due, to_stamp = leftovers(
            list(self.children(service)),
            active_name=active_name,
            pending_name=pending_name,
            delete_after_annotation=labels.DELETE_AFTER_ANNOTATION,
            now=time.time(),
            delay_s=deletion_delay_s(service),
        )
        by_name = {c["metadata"]["name"]: c for c in self.children(service)}
        for item in to_stamp:
            await self.writes.annotate_cluster(
                by_name[item.name], {labels.DELETE_AFTER_ANNOTATION: f"{item.delete_at:.0f}"}
            )
            self.writes.event(
                service,
                "ScheduledRayClusterDeletion",
                f"RayCluster {item.name} is deleted in {deletion_delay_s(service)}s",
            )
            current.soon(max(0.0, item.delete_at - time.time()))
        for name in due:
            await self.writes.delete_cluster(
                service, service["metadata"]["namespace"], name, "rayClusterDeletionDelaySeconds passed"
            )
        if to_stamp or due:
            current.soon(HEALTH_POLL_S)

    # --- status -----------------------------------------------------------------------------------

    def _num_serve_endpoints(self, cluster: Mapping[str, Any] | None) -> int:
        if cluster is None:
            return 0
        meta = cluster["metadata"]
        pods = self.pods.store.by_index(CLUSTER_INDEX, f"{meta['namespace']}/{meta['name']}")
        return sum(
            1 for p in pods if (p["metadata"].get("labels") or {}).get(SERVE_LABEL) == "true" and is_ready(p)
        )

    async def _write_status(self, cached: Mapping[str, Any], current: ReconcilePass) -> None:
        def seen(cluster: Obj | None, role: str) -> ClusterSeen | None:
            recorded = (current.status.get(f"{role}ServiceStatus") or {}).get("rayClusterName")
            if not recorded:
                return None
            share = None
            if current.progress is not None:
                share = current.progress.active if role == "active" else current.progress.pending
            return ClusterSeen(
                recorded, cluster, current.serve.get(recorded), share, recorded in current.serve
            )

        observed = Observed(
            active=seen(current.active, "active"),
            pending=seen(current.pending, "pending"),
            num_serve_endpoints=self._num_serve_endpoints(current.active),
            rolling_back=current.rolling_back,
            waiting_for=current.waiting_for,
            blocked=current.blocked,
            upgrade_blocked=current.upgrade_blocked,
        )
        # The stored status is the "before": times carry over from it unless what they describe changed.
        queue = self.manager.gate.queue_condition("RayService", cached)
        status = service_status(cached, observed, datetime.now(UTC), queue)
        await self.manager.status.write(resources.RAYSERVICES, cached, status)
