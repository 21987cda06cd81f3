"""Where a RayService's traffic goes: Serve on each cluster, the NewCluster switch and the
NewClusterWithIncrementalUpgrade loop (capacity through Serve, weights through the HTTPRoute).

``ReconcilePass`` carries what one reconcile learned and decided, so the status is computed from
exactly what was seen and done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rayquota.api.ray_v1 import RayServiceUpgradeType
from rayquota.operator.core.cache.store import Obj, Store
from rayquota.operator.ray.builders.services import head_container_ports
from rayquota.operator.ray.dashboard_api.dashboard import DashboardError, DashboardUnreachable
from rayquota.operator.ray.raycluster.plan import is_ready
from rayquota.operator.ray.rayjob.dashboard_calls import NoAnswerYet
from rayquota.operator.ray.rayservice import gateway
from rayquota.operator.ray.rayservice.incremental import (
    ClusterShare,
    Step,
    UpgradeOptions,
    UpgradeProgress,
    next_step,
)
from rayquota.operator.ray.rayservice.plan import upgrade_type
from rayquota.operator.ray.rayservice.serve_rounds import ServeRound, ServeRounds
from rayquota.operator.ray.rayservice.serve_status import ServeState
from rayquota.operator.ray.rayservice.status import stored_progress
from rayquota.operator.ray.rayservice.validation import upgrade_options
from rayquota.operator.ray.rayservice.writes import RayServiceWrites, build_cluster_serve_service
from rayquota.operator.ray.vocabulary import labels

log = logging.getLogger(__name__)

# How soon to look again while something moves (Serve deploying, traffic shifting), and at rest
# (Serve has no watch: its health is polled).
BUSY_REQUEUE_S = 1.0
HEALTH_POLL_S = 10.0
SERVING_ALONE = UpgradeProgress(active=ClusterShare(100, 100), pending=ClusterShare(0, 0))


@dataclass
class ReconcilePass:
    service: dict[str, Any]
    status: dict[str, Any]  # the stored status, edited as cluster names change
    active: Obj | None
    pending: Obj | None
    serve: dict[str, ServeState | None] = field(default_factory=dict)
    deployed: set[str] = field(default_factory=set)  # clusters whose Serve config changed just now
    progress: UpgradeProgress | None = None  # incremental upgrades only
    rolling_back: bool = False
    waiting_for: str = ""
    # The queue holds the upgrade (a slice of it waits for quota): no step moves until admitted.
    held_by_quota: bool = False
    blocked: tuple[str, str] | None = None
    upgrade_blocked: tuple[str, str] | None = None
    requeue_s: float | None = None

    def soon(self, seconds: float = BUSY_REQUEUE_S) -> None:
        self.requeue_s = seconds if self.requeue_s is None else min(self.requeue_s, seconds)

    @property
    def incremental(self) -> bool:
        return upgrade_type(self.service) == RayServiceUpgradeType.NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE

    @property
    def goal_serve_config(self) -> str:
        return str(self.service["spec"].get("serveConfigV2") or "")


def applied_serve_config(cluster: Mapping[str, Any]) -> str | None:
    return (cluster["metadata"].get("annotations") or {}).get(labels.SERVE_CONFIG_ANNOTATION)


class ServeTraffic:
    def __init__(
        self,
        writes: RayServiceWrites,
        head_pod: Callable[[Mapping[str, Any]], Obj | None],
        services: Store,
        rounds: ServeRounds,
    ) -> None:
        self.writes = writes
        self.rounds = rounds
        self.head_pod = head_pod
        self.services = services

    def cluster_ready(self, cluster: Mapping[str, Any]) -> bool:
        """Head running and ready, and not held by the queue's gate (a gated child is not ready)."""
        if (cluster.get("spec") or {}).get("suspend"):
            return False
        head = self.head_pod(cluster)
        return head is not None and is_ready(head)

    @staticmethod
    def serves(current: ReconcilePass, cluster: Mapping[str, Any]) -> bool:
        """Every application RUNNING on a config Serve had before this pass changed anything."""
        name = cluster["metadata"]["name"]
        state = current.serve.get(name)
        return state is not None and state.ready and name not in current.deployed

    # --- Serve on each cluster --------------------------------------------------------------------

    async def observe(self, current: ReconcilePass) -> None:
        """Ask Serve on each ready cluster, deploy what it lacks, and label the head pods."""
        upgrading = current.active is not None and current.pending is not None
        if current.incremental and upgrading:
            current.progress = stored_progress(current.status)
        for role, cluster in (("active", current.active), ("pending", current.pending)):
            if cluster is None:
                continue
            applied = applied_serve_config(cluster)
            # Mid-upgrade the active cluster keeps what it serves; the goal goes to the new one.
            keep = role == "active" and upgrading and applied is not None
            config = applied if keep and applied is not None else current.goal_serve_config
            capacity = None
            if current.progress is not None:
                capacity = (
                    current.progress.active if role == "active" else current.progress.pending
                ).target_capacity
            await self._observe_one(current, role, cluster, config, capacity)

    async def _observe_one(
        self, current: ReconcilePass, role: str, cluster: Obj, config: str, capacity: int | None
    ) -> None:
        service, name = current.service, cluster["metadata"]["name"]
        if not self.cluster_ready(cluster):
            current.serve[name] = None
            current.soon(HEALTH_POLL_S / 2)
            return
        try:
            answer = await self.rounds.round(
                service, cluster, config, capacity, applied_serve_config(cluster) != config
            )
            if isinstance(answer, NoAnswerYet):
                if answer is NoAnswerYet.NO_ROOM:
                    current.soon()
                # The answer re-queues the service; meanwhile the last state read stands (and so
                # does what it said of a failure). With none read yet (a new operator's first look,
                # as after a migration from KubeRay) Serve is not asked: the stored verdict stands
                # rather than going back to not-ready until the answer comes.
                last = self.rounds.last_state(service, cluster)
                if last is not None:
                    current.serve[name] = last
                    self._note_failure(current, role, name, last)
                return
            served = answer.get()
            assert isinstance(served, ServeRound)
            if served.deployed:
                await self.writes.record_deploy(service, cluster, config)
                current.deployed.add(name)
                current.soon()
        except (DashboardUnreachable, DashboardError, LookupError) as exc:
            log.info("Serve on RayCluster %s not reachable yet: %s", name, exc)
            current.serve[name] = None
            current.soon(HEALTH_POLL_S / 2)
            return
        state = served.state
        current.serve[name] = state
        if state.failure:
            self._note_failure(current, role, name, state)
        elif not state.ready:
            current.soon()
        head = self.head_pod(cluster)
        if head is not None:
            exclude = bool(service["spec"].get("excludeHeadPodFromServeSvc"))
            await self.writes.label_head_pod(head, state.healthy_proxies > 0 and not exclude)

    def _note_failure(self, current: ReconcilePass, role: str, name: str, state: ServeState) -> None:
        """A failed application: one event per failure, and the upgrade says why it waits."""
        if not state.failure:
            return
        if not _failed_before(current.status.get(f"{role}ServiceStatus") or {}, name, state):
            self.writes.event(
                current.service, "ServeApplicationFailed", f"RayCluster {name}: {state.failure}", warning=True
            )
        if role == "pending":
            current.waiting_for = f"the new cluster's Serve applications failed ({state.failure})"

    # --- NewCluster: one switch -------------------------------------------------------------------

    def promote(self, current: ReconcilePass) -> None:
        """The pending cluster becomes the active one (the old one is then a leftover)."""
        assert current.pending is not None
        old = current.active
        current.active, current.pending = current.pending, None
        new_name = current.active["metadata"]["name"]
        current.status["activeServiceStatus"] = {"rayClusterName": new_name}
        current.status.pop("pendingServiceStatus", None)
        current.progress = SERVING_ALONE if current.incremental else None
        where = f"replacing {old['metadata']['name']}" if old is not None else "the first cluster"
        self.writes.event(
            current.service, "PromotedRayCluster", f"RayCluster {new_name} serves now ({where})"
        )
        current.soon(0.0)

    # --- NewClusterWithIncrementalUpgrade: step by step -------------------------------------------

    async def incremental(self, current: ReconcilePass, retire: Callable[[Obj, str], Any]) -> None:
        service, active, pending = current.service, current.active, current.pending
        assert active is not None
        options = upgrade_options(service)
        await self.writes.ensure_gateway(service, gateway.build_gateway(service, options.gateway_class_name))
        for cluster in (active, pending):
            if cluster is not None:
                wanted = build_cluster_serve_service(service, cluster)
                live = self.services.get(wanted["metadata"]["namespace"], wanted["metadata"]["name"])
                await self.writes.ensure_service(service, wanted, live, announce=False)
        if pending is None:
            current.progress = SERVING_ALONE
            await self.route(current)
            return
        before = stored_progress(current.status)
        if current.held_by_quota and not current.rolling_back:
            step = Step(before, waiting_for=current.waiting_for)  # a rollback needs no new quota
        else:
            step = next_step(
                before,
                UpgradeOptions(
                    options.step_size_percent, options.interval_seconds, options.max_surge_percent
                ),
                now=datetime.now(UTC),
                pending_healthy=self.serves(current, pending),
                rolling_back=current.rolling_back,
            )
        current.waiting_for = current.waiting_for or step.waiting_for
        current.progress = step.progress
        if step.capacity_changed and not await self._apply_capacity(current, before, step.progress):
            current.progress = before  # Serve must take the new capacity before it is recorded
        await self.route(current)
        moved = current.progress != before
        if step.traffic_changed:
            self.writes.event(
                service, "TrafficMigrated",
                f"{current.progress.active.traffic_percent}% to {active['metadata']['name']}, "
                f"{current.progress.pending.traffic_percent}% to {pending['metadata']['name']}",
            )  # fmt: skip
        current.soon(step.wait_s if step.wait_s and not moved else BUSY_REQUEUE_S)
        if current.rolling_back and current.progress.rollback_done:
            await retire(pending, "rollback finished")
            current.status.pop("pendingServiceStatus", None)
            current.pending, current.rolling_back, current.progress = None, False, SERVING_ALONE
            self.writes.event(
                service, "RollbackFinished", f"RayCluster {active['metadata']['name']} serves alone"
            )
        elif not current.rolling_back and current.progress.upgrade_done:
            self.promote(current)

    async def _apply_capacity(
        self, current: ReconcilePass, before: UpgradeProgress, after: UpgradeProgress
    ) -> bool:
        """Give Serve on the cluster whose capacity moved its new target; False when it cannot yet."""
        assert current.active is not None and current.pending is not None
        moved_active = after.active.target_capacity != before.active.target_capacity
        cluster = current.active if moved_active else current.pending
        share = after.active if moved_active else after.pending
        if not self.cluster_ready(cluster) or cluster["metadata"]["name"] in current.deployed:
            return False
        if self.rounds.running(current.service, cluster):
            # Its round was started with the capacity recorded before this step and may deploy it
            # after ours: Serve would go back while the status says the new one. Its answer
            # re-queues the service.
            return False
        config = applied_serve_config(cluster) or current.goal_serve_config
        try:
            await self.writes.deploy(current.service, cluster, config, share.target_capacity)
        except (DashboardUnreachable, DashboardError, LookupError) as exc:
            log.info(
                "Serve on RayCluster %s did not take the new capacity: %s", cluster["metadata"]["name"], exc
            )
            return False
        current.deployed.add(cluster["metadata"]["name"])
        self.writes.event(
            current.service, "TargetCapacityChanged",
            f"Serve target_capacity {share.target_capacity}% on RayCluster {cluster['metadata']['name']}",
        )  # fmt: skip
        return True

    async def route(self, current: ReconcilePass) -> None:
        assert current.active is not None and current.progress is not None
        backends = [_backend(current.active, current.progress.active.traffic_percent)]
        if current.pending is not None:
            backends.append(_backend(current.pending, current.progress.pending.traffic_percent))
        await self.writes.ensure_httproute(
            current.service, gateway.build_httproute(current.service, backends)
        )


def _failed_before(stored: Mapping[str, Any], name: str, state: ServeState) -> bool:
    """The stored status already shows these applications failed on this cluster (reported then)."""
    if stored.get("rayClusterName") != name:
        return False
    before = stored.get("applicationStatuses") or {}
    return all(
        (before.get(app) or {}).get("status") == status.get("status")
        for app, status in state.applications.items()
        if status.get("status") != "RUNNING"
    )


def _backend(cluster: Mapping[str, Any], weight: int) -> gateway.Backend:
    port = head_container_ports(cluster)["serve"]
    return gateway.Backend(labels.serve_service_name(cluster["metadata"]["name"]), port, weight)
