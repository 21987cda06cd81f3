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
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from rayquota.api.ray_v1 import RayServiceUpgradeType
from rayquota.operator.config import OperatorConfig
from rayquota.operator.core import Manager, ObjectKey, Result, label_indexer, resources
from rayquota.operator.core.store import Obj
from rayquota.operator.ray import gateway, labels
from rayquota.operator.ray.conditions import is_true
from rayquota.operator.ray.dashboard import DashboardError, DashboardUnreachable
from rayquota.operator.ray.raycluster_plan import is_ready, node_type
from rayquota.operator.ray.rayservice_cluster import (
    RAYSERVICE_KIND,
    build_cluster,
    new_cluster_name,
    updated_cluster,
)
from rayquota.operator.ray.rayservice_incremental import (
    ClusterShare,
    UpgradeOptions,
    UpgradeProgress,
    next_step,
)
from rayquota.operator.ray.rayservice_plan import (
    ClusterStep,
    ServiceView,
    cluster_config,
    decide_clusters,
    deletion_delay_s,
    leftovers,
    upgrade_type,
)
from rayquota.operator.ray.rayservice_status import (
    GATEWAY_CLASS_MISSING,
    VALIDATION_FAILED,
    ClusterSeen,
    Observed,
    is_rolling_back,
    service_status,
    stored_progress,
)
from rayquota.operator.ray.rayservice_suspend import SuspendHandler
from rayquota.operator.ray.rayservice_validation import upgrade_options, validate_rayservice
from rayquota.operator.ray.rayservice_writes import (
    RayServiceWrites,
    build_cluster_serve_service,
    build_service_services,
)
from rayquota.operator.ray.resolver import DashboardResolver, resolver_from_settings
from rayquota.operator.ray.serve_status import ServeState

log = logging.getLogger(__name__)

SERVICE_INDEX = "rayservice"
CLUSTER_INDEX = "raycluster"
# How soon to look again: while something moves (Serve deploying, traffic shifting) and at rest.
BUSY_REQUEUE_S = 1.0
HEALTH_POLL_S = 10.0


def parent_service(obj: Obj) -> list[ObjectKey]:
    """Mapper: the RayService a child cluster or Service came from."""
    obj_labels = obj["metadata"].get("labels") or {}
    if obj_labels.get(labels.ORIGINATED_FROM_CRD) != RAYSERVICE_KIND:
        return []
    name = obj_labels.get(labels.ORIGINATED_FROM_CR_NAME)
    return [ObjectKey(str(obj["metadata"].get("namespace") or ""), str(name))] if name else []


def service_index(obj: Obj) -> list[str]:
    return [f"{key.namespace}/{key.name}" for key in parent_service(obj)]


@dataclass
class Pass:
    """What one reconcile learned and decided, gathered for the status."""

    service: dict[str, Any]
    status: dict[str, Any]
    active: Obj | None
    pending: Obj | None
    serve: dict[str, ServeState | None] = field(default_factory=dict)
    deployed: set[str] = field(default_factory=set)  # clusters whose Serve config changed just now
    progress: UpgradeProgress | None = None
    rolling_back: bool = False
    waiting_for: str = ""
    blocked: tuple[str, str] | None = None
    requeue_s: float | None = None

    def soon(self, seconds: float = BUSY_REQUEUE_S) -> None:
        self.requeue_s = seconds if self.requeue_s is None else min(self.requeue_s, seconds)


class RayServiceReconciler:
    def __init__(self, manager: Manager, config: OperatorConfig, resolver: DashboardResolver) -> None:
        self.manager = manager
        self.config = config
        self.writes = RayServiceWrites(manager, resolver, config.dashboard_timeout_s)
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
        self.controller.watch(self.services)
        self.controller.watch(self.clusters, parent_service)
        self.controller.watch(self.k8s_services, parent_service)
        self.controller.watch(self.pods, self._pod_owner_service)

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
            return None  # children are owned: the garbage collector removes them
        if labels.managed_by_other_controller(cached) or self.manager.status.is_stale(cached):
            return None
        service = copy.deepcopy(cached)
        suspended = await self.suspend.handle(service, self.children(service), datetime.now(UTC))
        if suspended is not None:
            if suspended.status is not None:
                await self.manager.status.write(resources.RAYSERVICES, cached, suspended.status)
            return suspended.result
        status = copy.deepcopy(service.get("status") or {})
        current = Pass(service, status, *self._recorded_clusters(service))
        problems = validate_rayservice(service)
        if problems:
            message = "; ".join(problems)
            self.writes.event(service, "InvalidRayServiceSpec", message, warning=True)
            current.blocked = (VALIDATION_FAILED, message)
        else:
            await self._step(current)
        await self._write_status(cached, current)
        if current.requeue_s is not None:
            return Result(requeue_after_s=current.requeue_s)
        return Result(requeue_after_s=HEALTH_POLL_S) if current.active is not None else None

    def _recorded_clusters(self, service: Mapping[str, Any]) -> tuple[Obj | None, Obj | None]:
        status = service.get("status") or {}
        by_name = {c["metadata"]["name"]: c for c in self.children(service)}
        active_name = (status.get("activeServiceStatus") or {}).get("rayClusterName")
        pending_name = (status.get("pendingServiceStatus") or {}).get("rayClusterName")
        return by_name.get(active_name), by_name.get(pending_name)

    async def _step(self, current: Pass) -> None:
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
        await self._observe_serve(current)
        incremental = upgrade_type(service) == RayServiceUpgradeType.NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE
        if incremental and current.active is not None:
            await self._incremental(current)
        elif current.pending is not None and self._serves(current, current.pending):
            self._promote(current)
        serving = current.active
        if serving is not None:
            for wanted in build_service_services(service, serving):
                live = self.k8s_services.store.get(
                    wanted["metadata"]["namespace"], wanted["metadata"]["name"]
                )
                await self.writes.ensure_service(service, wanted, live)

    async def _apply_cluster_step(self, current: Pass, step: ClusterStep, change: Any, message: str) -> bool:
        """Take the planner's cluster move; False when the rest of the reconcile must wait."""
        service, status = current.service, current.status
        incremental = upgrade_type(service) == RayServiceUpgradeType.NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE
        namespace = service["metadata"]["namespace"]
        if step == ClusterStep.PREPARE_PENDING:
            if incremental and current.active is not None:
                class_name = upgrade_options(service).gateway_class_name
                if not await self.writes.gateway_class_exists(class_name):
                    message = (
                        f"GatewayClass {class_name!r} not found: install it (and the Gateway API) to upgrade"
                    )
                    self.writes.event(service, GATEWAY_CLASS_MISSING, message, warning=True)
                    current.waiting_for = message
                    current.soon(HEALTH_POLL_S)
                    return True
            name = new_cluster_name(service["metadata"]["name"])
            status["pendingServiceStatus"] = {"rayClusterName": name}
            self.writes.event(service, "PreparingRayCluster", f"{message}: RayCluster {name}")
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
            await self._retire(current, current.pending, message)
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
            self.writes.event(service, "UpgradeDisabled", message)
            current.waiting_for = message
        del namespace
        return True

    async def _retire(self, current: Pass, cluster: Mapping[str, Any], why: str) -> None:
        """A cluster that never served, or serves no more: delete it now."""
        meta = cluster["metadata"]
        await self.writes.delete_cluster(current.service, meta["namespace"], meta["name"], why)

    async def _cleanup_leftovers(self, current: Pass) -> None:
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

    # --- Serve ------------------------------------------------------------------------------------

    def _cluster_ready(self, cluster: Mapping[str, Any]) -> bool:
        """Head running and ready, and not held by the queue's gate (a gated child is not ready)."""
        if (cluster.get("spec") or {}).get("suspend"):
            return False
        head = self.head_pod(cluster)
        return head is not None and is_ready(head)

    def _serves(self, current: Pass, cluster: Mapping[str, Any]) -> bool:
        name = cluster["metadata"]["name"]
        state = current.serve.get(name)
        return state is not None and state.ready and name not in current.deployed

    async def _observe_serve(self, current: Pass) -> None:
        service = current.service
        goal_config = str(service["spec"].get("serveConfigV2") or "")
        incremental = upgrade_type(service) == RayServiceUpgradeType.NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE
        upgrading = current.active is not None and current.pending is not None
        progress = stored_progress(current.status) if incremental and upgrading else None
        for role, cluster in (("active", current.active), ("pending", current.pending)):
            if cluster is None:
                continue
            name = cluster["metadata"]["name"]
            if not self._cluster_ready(cluster):
                current.serve[name] = None
                current.soon(HEALTH_POLL_S / 2)
                continue
            applied = (cluster["metadata"].get("annotations") or {}).get(labels.SERVE_CONFIG_ANNOTATION)
            wanted_config, capacity = goal_config, None
            if role == "active" and upgrading:
                if not incremental:
                    wanted_config = applied if applied is not None else goal_config  # keeps serving as is
                else:
                    wanted_config = applied if applied is not None else goal_config
            if progress is not None:
                capacity = (progress.active if role == "active" else progress.pending).target_capacity
            try:
                state = await self.writes.serve_state(cluster)
                if applied != wanted_config or not state.applications or state.target_capacity != capacity:
                    await self.writes.deploy(service, cluster, wanted_config, capacity)
                    current.deployed.add(name)
                    current.soon()
            except (DashboardUnreachable, DashboardError, LookupError) as exc:
                log.info("Serve on RayCluster %s not reachable yet: %s", name, exc)
                current.serve[name] = None
                current.soon(HEALTH_POLL_S / 2)
                continue
            current.serve[name] = state
            if state.failure:
                self.writes.event(
                    service, "ServeApplicationFailed", f"RayCluster {name}: {state.failure}", warning=True
                )
            elif not state.ready:
                current.soon()
            head = self.head_pod(cluster)
            if head is not None:
                exclude = bool(service["spec"].get("excludeHeadPodFromServeSvc"))
                await self.writes.label_head_pod(head, state.healthy_proxies > 0 and not exclude)

    # --- switching traffic ------------------------------------------------------------------------

    def _promote(self, current: Pass) -> None:
        """NewCluster (or a first cluster): the pending cluster is healthy, it becomes active."""
        assert current.pending is not None
        old = current.active
        current.active, current.pending = current.pending, None
        current.status["activeServiceStatus"] = {"rayClusterName": current.active["metadata"]["name"]}
        current.status.pop("pendingServiceStatus", None)
        current.progress = None
        where = f"replacing {old['metadata']['name']}" if old is not None else "first cluster"
        self.writes.event(
            current.service,
            "PromotedRayCluster",
            f"RayCluster {current.active['metadata']['name']} serves now ({where})",
        )
        current.soon(0.0)

    async def _incremental(self, current: Pass) -> None:
        service, active = current.service, current.active
        assert active is not None
        options = upgrade_options(service)
        await self.writes.ensure_gateway(service, gateway.build_gateway(service, options.gateway_class_name))
        for cluster in (current.active, current.pending):
            if cluster is not None:
                wanted = build_cluster_serve_service(service, cluster)
                live = self.k8s_services.store.get(
                    wanted["metadata"]["namespace"], wanted["metadata"]["name"]
                )
                await self.writes.ensure_service(service, wanted, live)
        if current.pending is None:
            current.progress = UpgradeProgress(active=ClusterShare(100, 100), pending=ClusterShare(0, 0))
            await self._route(current)
            return
        progress = stored_progress(current.status)
        opts = UpgradeOptions(options.step_size_percent, options.interval_seconds, options.max_surge_percent)
        step = next_step(
            progress,
            opts,
            now=datetime.now(UTC),
            rolling_back=current.rolling_back,
            pending_healthy=self._serves(current, current.pending),
        )
        current.waiting_for = step.waiting_for
        if step.capacity_changed:
            changed = current.active if step.progress.active != progress.active else current.pending
            if not self._cluster_ready(changed) or changed["metadata"]["name"] in current.deployed:
                current.progress = progress  # Serve must take the new capacity first
                current.soon()
                await self._route(current)
                return
            share = step.progress.active if changed is current.active else step.progress.pending
            config = (changed["metadata"].get("annotations") or {}).get(labels.SERVE_CONFIG_ANNOTATION)
            await self.writes.deploy(
                service,
                changed,
                config or str(service["spec"].get("serveConfigV2") or ""),
                share.target_capacity,
            )
            current.deployed.add(changed["metadata"]["name"])
        current.progress = step.progress
        await self._route(current)
        if step.traffic_changed:
            self.writes.event(
                service,
                "TrafficMigrated",
                f"traffic {step.progress.active.traffic_percent}% on "
                f"{active['metadata']['name']}, {step.progress.pending.traffic_percent}% on "
                f"{current.pending['metadata']['name']}",
            )
        if step.capacity_changed or step.traffic_changed:
            current.soon()
        elif step.wait_s:
            current.soon(step.wait_s)
        if current.rolling_back and step.progress.rollback_done:
            await self._retire(current, current.pending, "rollback finished")
            current.status.pop("pendingServiceStatus", None)
            current.pending = None
            current.rolling_back = False
            current.progress = replace(step.progress, pending=ClusterShare(0, 0))
            self.writes.event(
                service, "RollbackFinished", f"RayCluster {active['metadata']['name']} serves alone"
            )
        elif not current.rolling_back and step.progress.upgrade_done:
            self._promote(current)
            current.progress = UpgradeProgress(active=ClusterShare(100, 100), pending=ClusterShare(0, 0))
        elif not (step.capacity_changed or step.traffic_changed or step.wait_s):
            current.soon()

    async def _route(self, current: Pass) -> None:
        assert current.active is not None and current.progress is not None
        backends = [self._backend(current.active, current.progress.active.traffic_percent)]
        if current.pending is not None:
            backends.append(self._backend(current.pending, current.progress.pending.traffic_percent))
        await self.writes.ensure_httproute(
            current.service, gateway.build_httproute(current.service, backends)
        )

    @staticmethod
    def _backend(cluster: Mapping[str, Any], weight: int) -> gateway.Backend:
        from rayquota.operator.ray.services import head_container_ports

        return gateway.Backend(
            labels.serve_service_name(cluster["metadata"]["name"]),
            head_container_ports(cluster)["serve"],
            weight,
        )

    # --- status -----------------------------------------------------------------------------------

    def _num_serve_endpoints(self, cluster: Mapping[str, Any] | None) -> int:
        if cluster is None:
            return 0
        meta = cluster["metadata"]
        pods = self.pods.store.by_index(CLUSTER_INDEX, f"{meta['namespace']}/{meta['name']}")
        from rayquota.operator.ray.podspec import SERVE_LABEL

        return sum(
            1 for p in pods if (p["metadata"].get("labels") or {}).get(SERVE_LABEL) == "true" and is_ready(p)
        )

    async def _write_status(self, cached: Mapping[str, Any], current: Pass) -> None:
        def seen(cluster: Obj | None, role: str) -> ClusterSeen | None:
            recorded = (current.status.get(f"{role}ServiceStatus") or {}).get("rayClusterName")
            if not recorded:
                return None
            share = None
            if current.progress is not None:
                share = current.progress.active if role == "active" else current.progress.pending
            return ClusterSeen(recorded, cluster, current.serve.get(recorded), share)

        observed = Observed(
            active=seen(current.active, "active"),
            pending=seen(current.pending, "pending"),
            num_serve_endpoints=self._num_serve_endpoints(current.active),
            rolling_back=current.rolling_back,
            waiting_for=current.waiting_for,
            blocked=current.blocked,
        )
        service = {**current.service, "status": current.status}
        status = service_status(service, observed, datetime.now(UTC))
        await self.manager.status.write(resources.RAYSERVICES, cached, status)


def setup(manager: Manager, config: OperatorConfig) -> RayServiceReconciler:
    resolver = resolver_from_settings(
        config.dashboard_resolver, config.dashboard_map_file, config.dashboard_url
    )
    reconciler = RayServiceReconciler(manager, config, resolver)
    manager.components["rayservice"] = reconciler
    return reconciler


__all__ = ["RayServiceReconciler", "cluster_config", "is_true", "setup"]
