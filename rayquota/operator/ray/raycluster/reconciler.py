"""The RayCluster reconciler: cached objects in, the plan applied, the status written exactly.

The decisions are pure and live in raycluster_plan (pods) and raycluster_status (status). Pods,
Services and RBAC objects come from watch-fed caches (server-side selected on `ray.io/cluster`),
so a reconcile makes no reads; a reconcile that has not yet seen its own pod changes makes no
new ones (expectations). Failures raise, and the work queue backs off per cluster.

Pods, Services, RBAC objects, the auth Secret and the Ingress are owned by the cluster, and the
garbage collector removes them, with or without the operator. The one finalizer is KubeRay's for
GCS fault tolerance on Redis: the cluster's keys leave Redis before it goes (redis_cleanup).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

from rayquota.api.ray_unimplemented import UNIMPLEMENTED_FIELD_REASON, unimplemented_warning
from rayquota.operator.core import (
    Expectations,
    Manager,
    ObjectKey,
    Result,
    WaitForCache,
    owner_uids,
    resources,
)
from rayquota.operator.core.cache.informer import ADDED, DELETED
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.core.controller import ReportedFailure
from rayquota.operator.core.timestamps import now_rfc3339
from rayquota.operator.kube import UNREACHABLE, ApiError, Conflict
from rayquota.operator.ray.builders import ingress, rbac, route, services
from rayquota.operator.ray.builders.auth_token import AuthTokens
from rayquota.operator.ray.builders.hashing import spec_hash
from rayquota.operator.ray.builders.podspec import PodContext, build_head_pod
from rayquota.operator.ray.raycluster import redis_cleanup
from rayquota.operator.ray.raycluster.admitted_caps import AdmittedCaps, ClusterCaps, Uncapped
from rayquota.operator.ray.raycluster.plan import ClusterPlan, node_type, plan_cluster
from rayquota.operator.ray.raycluster.security_fields import allowed_fields
from rayquota.operator.ray.raycluster.status import (
    cluster_status,
    status_changed,
    status_settled,
    workers_caught_up,
)
from rayquota.operator.ray.settings import RaySettings
from rayquota.operator.ray.vocabulary import labels

log = logging.getLogger(__name__)

OWNER_INDEX = "owner"
# While pods come and go, a cluster's status is a progress report: it is written at most this
# often (so 1,000 clusters in motion cost at most 200 writes/s), while a change of `state`
# (ready, suspended, ...) is written at once.
STATUS_COALESCE_S = 5.0
# A plan whose creations were dropped (the queue's caps changed meanwhile) is made again after
# this long at the latest (the Workload's change usually brings the cluster back first).
REPLAN_S = 0.5
# Finalizer written by rayquota 0.1 on every RayCluster; removed on sight so deletion never hangs.
LEGACY_FINALIZER = "rayquota.io/finalizer"


class ReconcileFailed(ReportedFailure):
    """Something could not be created or deleted; the status says what. Retried with backoff."""


def warn_unimplemented_fields(manager: Manager, obj: Mapping[str, Any]) -> None:
    """One Warning per spec generation naming the KubeRay fields set on the object that we ignore
    (they round-trip, but nothing acts on them). A kind without status.observedGeneration (a
    RayCronJob) gets it on every reconcile, which the recorder aggregates into one Event."""
    observed = (obj.get("status") or {}).get("observedGeneration")
    if observed is not None and observed == obj["metadata"].get("generation"):
        return
    message = unimplemented_warning(obj)
    if message:
        manager.recorder.post(obj, "Warning", UNIMPLEMENTED_FIELD_REASON, message)


def add_failure(failures: list[str], failure: str) -> None:
    if failure not in failures:
        failures.append(failure)


def owning_cluster(obj: Mapping[str, Any]) -> list[ObjectKey]:
    namespace = str(obj["metadata"].get("namespace") or "")
    return [
        ObjectKey(namespace, str(ref["name"]))
        for ref in obj["metadata"].get("ownerReferences") or []
        if ref.get("kind") == "RayCluster"
    ]


class RayClusterReconciler:
    def __init__(self, manager: Manager, config: RaySettings, tokens: AuthTokens) -> None:
        self.manager = manager
        self.client = manager.client
        self.config = config
        self.tokens = tokens
        self.allowed_fields = allowed_fields(config.feature_gates.enabled)
        # The queue's caps on this cluster's pods (queue/setup.py installs its gate here).
        self.caps: ClusterCaps = Uncapped()
        self.redis_cleanup = redis_cleanup.RedisCleanup(manager)
        self.ingresses = manager.informer(ingress.INGRESSES, label_selector=labels.RAY_CLUSTER)
        # OpenShift (seen at start-up) without USE_INGRESS_ON_OPENSHIFT: Routes instead of Ingresses.
        self.routes = (
            manager.informer(route.ROUTES, label_selector=labels.RAY_CLUSTER)
            if config.openshift_routes
            else None
        )
        self.clusters = manager.informer(resources.RAYCLUSTERS)
        owned = {OWNER_INDEX: owner_uids}
        self.pods = manager.informer(resources.PODS, label_selector=labels.RAY_CLUSTER, indexers=owned)
        self.services = manager.informer(
            resources.SERVICES, label_selector=labels.RAY_CLUSTER, indexers=owned
        )
        self.rbac = {
            resource: manager.informer(resource, label_selector=labels.RAY_CLUSTER)
            for resource in (resources.SERVICE_ACCOUNTS, resources.ROLES, resources.ROLE_BINDINGS)
        }
        self.expectations = Expectations()
        self.controller = manager.controller("raycluster", self.reconcile)
        self.controller.watch(self.clusters)
        children = (self.pods, self.services, *self.rbac.values(), self.ingresses, self.redis_cleanup.jobs)
        children += (self.routes,) if self.routes is not None else ()
        for informer in children:
            self.controller.watch(informer, owning_cluster)
        self.pods.on_change(self._observe_pod)

    def _observe_pod(self, kind: str, pod: Obj, old: Obj | None) -> None:
        name = str(pod["metadata"]["name"])
        for key in owning_cluster(pod):
            if kind == ADDED:
                self.expectations.observed_created(key, name)
            if kind == DELETED or pod["metadata"].get("deletionTimestamp"):
                self.expectations.observed_deleted(key, name)

    def _sibling_creations_in_flight(self, cluster: Mapping[str, Any], key: ObjectKey) -> bool:
        """Whether another RayCluster of the same owner has pod creations not yet in the cache."""
        owners = {
            str(ref.get("uid"))
            for ref in cluster["metadata"].get("ownerReferences") or []
            if ref.get("controller") and ref.get("uid")
        }
        if not owners:
            return False
        for other in self.clusters.store.list(cluster["metadata"]["namespace"]):
            other_key = ObjectKey.of(other)
            if other_key == key:
                continue
            refs = other["metadata"].get("ownerReferences") or []
            if any(str(ref.get("uid")) in owners for ref in refs) and not self.expectations.satisfied(
                other_key
            ):
                return True
        return False

    def pods_of(self, cluster: Mapping[str, Any]) -> list[Obj]:
        # Owner uid, not name: a same-named cluster recreated quickly must not adopt old pods.
        return self.pods.store.by_index(OWNER_INDEX, str(cluster["metadata"]["uid"]))

    async def reconcile(self, key: ObjectKey) -> Result | None:
        cluster = self.clusters.store.get_key(key)
        if cluster is None:
            self.expectations.forget(key)
            return None
        if LEGACY_FINALIZER in (cluster["metadata"].get("finalizers") or []):
            await self._drop_legacy_finalizer(cluster)
            return None
        if labels.managed_by_other_controller(cluster):
            return None
        if cluster["metadata"].get("deletionTimestamp"):
            return await self._being_deleted(cluster)
        if self.manager.status.is_stale(cluster):
            raise WaitForCache  # our last status write is on its way through the watch
        warn_unimplemented_fields(self.manager, cluster)
        pods = self.pods_of(cluster)
        caps = self.caps.caps_for(cluster)
        plan = plan_cluster(
            cluster,
            pods,
            self.config.version,
            caps=caps,
            cluster_domain=self.config.cluster_domain,
            allowed=self.allowed_fields,
        )
        failures: list[str] = []
        head_service: Mapping[str, Any] | None = None
        replan = False
        if plan.errors:
            message = "; ".join(plan.errors)
            if (cluster.get("status") or {}).get("reason") != message:
                self.manager.recorder.post(cluster, "Warning", "InvalidRayClusterSpec", message)
        else:
            if redis_cleanup.wanted(cluster) and redis_cleanup.REDIS_CLEANUP_FINALIZER not in (
                cluster["metadata"].get("finalizers") or []
            ):
                # Before any pod: once the head has written to Redis, deletion must clean it up.
                await self.redis_cleanup.hold(cluster)
                return None  # the finalizer's watch event brings the cluster back
            await self.tokens.ensure_secret(cluster)
            head_service = await self._ensure_services(cluster, failures)
            await self._ensure_ingress(cluster, failures)
            if cluster["spec"].get("enableInTreeAutoscaling"):
                await self._ensure_autoscaler_rbac(cluster, failures)
            # Until the cache shows our own last pod changes, acting again could double them.
            await self._confirm_creations(key, failures)
            if self.expectations.satisfied(key):
                # The awaits above let watch events in: a pod still expected when the plan was
                # made may be in the cache now, satisfying the expectations, and a plan made
                # without it would create it a second time. Plan again from the cache as it is
                # when the expectations are read (no await between the two).
                fresh = self.pods_of(cluster)
                if len(fresh) != len(pods) or any(a is not b for a, b in zip(fresh, pods, strict=True)):
                    pods = fresh
                    plan = plan_cluster(
                        cluster,
                        pods,
                        self.config.version,
                        caps=caps,
                        cluster_domain=self.config.cluster_domain,
                        allowed=self.allowed_fields,
                    )
                replan = not await self._apply(key, cluster, plan, failures, caps)
        # Pods we just created or deleted are not in the cache yet, so a status computed now is
        # already out of date; their watch events bring us back to write the real one.
        in_motion = not failures and not self.expectations.satisfied(key)
        deferred = await self._write_status(cluster, pods, head_service, plan, failures, in_motion)
        if failures:
            raise ReconcileFailed("; ".join(failures))
        if replan:
            deferred = min(deferred or REPLAN_S, REPLAN_S)
        return Result(requeue_after_s=deferred) if deferred else None

    async def _write_status(
        self,
        cluster: Obj,
        pods: list[Obj],
        head_service: Mapping[str, Any] | None,
        plan: ClusterPlan,
        failures: list[str],
        pods_in_motion: bool = False,
    ) -> float:
        """Write the status; returns how long a coalesced write was deferred (0 when written).
        While our own pod changes are not yet in the cache (`pods_in_motion`) only a change of
        `state` is written."""
        now = now_rfc3339()
        queue = self.manager.gate.queue_condition("RayCluster", cluster)
        status = cluster_status(cluster, pods, head_service, plan, failures, now, queue)
        previous = cluster.get("status") or {}
        if not status_changed(previous, status):
            return 0.0
        # Written at once: a new state, a failure, the available workers reaching the desired, and
        # a status with nothing left in motion (the end of a change).
        transition = (
            status.get("state") != previous.get("state")
            or failures
            or workers_caught_up(previous, status)
            or status_settled(status)
        )
        if not transition:
            if pods_in_motion:
                return 0.0
            deferred = self.manager.status.deferral(cluster, status, STATUS_COALESCE_S)
            if deferred > 0:
                return deferred
        status["lastUpdateTime"] = now
        await self.manager.status.write(resources.RAYCLUSTERS, cluster, status)
        return 0.0

    async def _being_deleted(self, cluster: Obj) -> Result | None:
        """Only the Redis cleanup has anything to do while a cluster is being deleted."""
        if not redis_cleanup.wanted(cluster):
            await self.redis_cleanup.release_if_held(cluster)
            return None
        head = build_head_pod(
            PodContext(cluster, self.config.version, spec_hash(cluster["spec"]), self.config.cluster_domain)
        )
        return await self.redis_cleanup.finalize(cluster, self.pods_of(cluster), head)

    async def _ensure_ingress(self, cluster: Obj, failures: list[str]) -> None:
        """The dashboard's Ingress (enableIngress): created, and brought back to the spec."""
        if not ingress.enabled(cluster):
            return
        if self.routes is not None:
            await self._ensure_route(
                cluster, self.routes.store.list(cluster["metadata"]["namespace"]), failures
            )
            return
        wanted = ingress.build_ingress(cluster)
        meta = wanted["metadata"]
        live = self.ingresses.store.get(meta["namespace"], meta["name"])
        if live is None:
            await self._create_owned(cluster, ingress.INGRESSES, wanted, failures)
            return
        if cluster["metadata"]["uid"] not in owner_uids(live):
            message = (
                f"Ingress {meta['namespace']}/{meta['name']} exists and is not this RayCluster's: left alone"
            )
            self.manager.recorder.post(cluster, "Warning", "FailedToCreateIngress", message)
            return
        if not ingress.needs_update(live, wanted):
            return
        try:
            await self.client.replace(
                ingress.INGRESSES.path(meta["namespace"], meta["name"]), ingress.updated(live, wanted)
            )
        except ApiError as exc:
            failures.append(f"update Ingress {meta['name']}: {exc.message}")
            self.manager.recorder.post(cluster, "Warning", "FailedToUpdateIngress", exc.message)
            return
        self.manager.recorder.post(
            cluster, "Normal", "UpdatedIngress", f"Updated Ingress {meta['namespace']}/{meta['name']}"
        )

    async def _ensure_route(self, cluster: Obj, routes: list[Obj], failures: list[str]) -> None:
        """The dashboard's OpenShift Route: created when the cluster has none, as KubeRay does."""
        if route.routes_of(cluster, routes):
            return
        problem = route.unroutable(cluster)
        if problem is not None:  # for good: a namespace is never renamed, so no retry
            self.manager.recorder.post(cluster, "Warning", "FailedToCreateRoute", problem)
            return
        await self._create_owned(cluster, route.ROUTES, route.build_route(cluster), failures)

    async def _drop_legacy_finalizer(self, cluster: Obj) -> None:
        finalizers = [f for f in cluster["metadata"].get("finalizers") or [] if f != LEGACY_FINALIZER]
        patch = {
            "metadata": {"finalizers": finalizers, "resourceVersion": cluster["metadata"]["resourceVersion"]}
        }
        meta = cluster["metadata"]
        await self.client.merge_patch(resources.RAYCLUSTERS.path(meta["namespace"], meta["name"]), patch)

    async def _create_owned(
        self, cluster: Obj, resource: Any, manifest: Mapping[str, Any], failures: list[str]
    ) -> Obj | None:
        namespace = cluster["metadata"]["namespace"]
        name = manifest["metadata"]["name"]
        try:
            created: Obj = await self.client.create(resource.path(namespace), manifest)
        except Conflict:
            return None  # it exists; the cache has not seen it yet
        except ApiError as exc:
            failures.append(f"create {manifest['kind']} {name}: {exc.message}")
            self.manager.recorder.post(cluster, "Warning", f"FailedToCreate{manifest['kind']}", exc.message)
            return None
        self.manager.recorder.post(
            cluster, "Normal", f"Created{manifest['kind']}", f"Created {manifest['kind']} {namespace}/{name}"
        )
        return created

    async def _ensure_services(self, cluster: Obj, failures: list[str]) -> Mapping[str, Any] | None:
        namespace = cluster["metadata"]["namespace"]
        wanted = [services.build_head_service(cluster)]
        if services.wants_serve_service(cluster):
            wanted.append(services.build_serve_service(cluster))
        if services.needs_headless_worker_service(cluster):
            wanted.append(services.build_headless_worker_service(cluster))
        head_service: Mapping[str, Any] | None = None
        for manifest in wanted:
            live = self.services.store.get(namespace, manifest["metadata"]["name"])
            if live is None:
                live = await self._create_owned(cluster, resources.SERVICES, manifest, failures)
            if manifest is wanted[0]:
                head_service = live
        return head_service

    async def _ensure_autoscaler_rbac(self, cluster: Obj, failures: list[str]) -> None:
        namespace = cluster["metadata"]["namespace"]
        by_kind = {resource.kind: (resource, informer) for resource, informer in self.rbac.items()}
        for _plural, manifest in rbac.build_autoscaler_rbac(cluster):
            resource, informer = by_kind[manifest["kind"]]
            if informer.store.get(namespace, manifest["metadata"]["name"]) is None:
                await self._create_owned(cluster, resource, manifest, failures)

    def pods_in_flight(self, namespace: str, name: str) -> bool:
        """Pods of this cluster created or deleted by us that the pod cache does not show yet
        (the queue's port: its quota is not released while pods it cannot see may exist)."""
        return not self.expectations.satisfied(ObjectKey(namespace, name))

    def _creation_unanswered(
        self, key: ObjectKey, plan: ClusterPlan, index: int, failures: list[str], message: str
    ) -> None:
        """The answer to creating ``plan.create[index]`` was lost, not a refusal: the pod may
        have been stored. It is looked up by name before anything else is created for this
        cluster; the creations after it were not tried."""
        self.expectations.creation_unconfirmed(key, str(plan.create[index]["metadata"]["name"]))
        for skipped in plan.create[index + 1 :]:
            self.expectations.creation_failed(key, str(skipped["metadata"]["name"]))
        add_failure(failures, message)

    async def _confirm_creations(self, key: ObjectKey, failures: list[str]) -> None:
        """Look up the pods whose creation got no answer: gone means it failed."""
        for pod_name in self.expectations.unconfirmed(key):
            try:
                found = await self.client.get(resources.PODS.path(key.namespace, pod_name))
            except UNREACHABLE as exc:
                add_failure(failures, f"look up pod {pod_name} whose creation got no answer: {exc!r}")
                return
            except ApiError as exc:
                add_failure(failures, f"look up pod {pod_name} whose creation got no answer: {exc.message}")
                return
            self.expectations.confirmed(key, pod_name, exists=found is not None)

    async def _apply(
        self, key: ObjectKey, cluster: Obj, plan: ClusterPlan, failures: list[str], caps: AdmittedCaps | None
    ) -> bool:
        """Deletes and creates what the plan says; False when its creations were dropped because
        the queue's caps changed since the plan (the cluster plans again)."""
        namespace = cluster["metadata"]["namespace"]
        recorder = self.manager.recorder
        self.expectations.expect_deletions(key, [str(d.pod["metadata"]["name"]) for d in plan.delete])
        for deletion in plan.delete:
            pod_name = str(deletion.pod["metadata"]["name"])
            kind = "Head" if node_type(deletion.pod) == labels.HEAD_NODE else "Worker"
            try:
                deleted = await self.client.delete(resources.PODS.path(namespace, pod_name))
            except ApiError as exc:
                self.expectations.deletion_failed(key, pod_name)
                failures.append(f"delete pod {pod_name}: {exc.message}")
                recorder.post(cluster, "Warning", f"FailedToDelete{kind}Pod", exc.message)
                continue
            if not deleted:
                self.expectations.deletion_failed(key, pod_name)  # already gone
            else:
                recorder.post(
                    cluster,
                    "Normal",
                    f"Deleted{kind}Pod",
                    f"Deleted pod {namespace}/{pod_name}: {deletion.message}",
                )
        if plan.restamp:
            stamp = {
                labels.OPERATOR_VERSION_ANNOTATION: self.config.version,
                labels.HASH_ANNOTATION: spec_hash(cluster["spec"]),
            }
            for pod_name in plan.restamp:
                try:
                    await self.client.merge_patch(
                        resources.PODS.path(namespace, pod_name), {"metadata": {"annotations": stamp}}
                    )
                except ApiError as exc:
                    failures.append(f"re-stamp pod {pod_name}: {exc.message}")
        if plan.create and self.caps.caps_for(cluster) != caps:
            # The caps were read before this reconcile's awaits; an eviction or a smaller slice
            # may have come since, and the queue may be about to release the quota (it does once
            # no pod of ours is in flight, which the expectations below would say). What the old
            # caps allowed is not created; the Workload's event, or the timer, plans again.
            return False
        if plan.create and caps is not None and self._sibling_creations_in_flight(cluster, key):
            # The clusters of one queued object (a RayService's two during an upgrade) share one
            # budget, and the caps count the other clusters' pods from the cache: pods a sibling
            # created a moment ago are not in it yet, so two scale-ups at once would each fit
            # alone and not together. Checked and claimed with no await in between; this cluster
            # plans again once the sibling's pods are seen.
            return False
        self.expectations.expect_creations(key, [str(m["metadata"]["name"]) for m in plan.create])
        for index, manifest in enumerate(plan.create):
            pod_name = str(manifest["metadata"]["name"])
            kind = "Head" if node_type(manifest) == labels.HEAD_NODE else "Worker"
            try:
                await self.client.create(resources.PODS.path(namespace), copy.deepcopy(manifest))
            except UNREACHABLE as exc:
                self._creation_unanswered(key, plan, index, failures, f"create {kind.lower()} pod: {exc!r}")
                break
            except ApiError as exc:
                if exc.status >= 500:
                    message = f"create {kind.lower()} pod: {exc.message.replace(pod_name, '<pod>')}"
                    self._creation_unanswered(key, plan, index, failures, message)
                    break
                # Like KubeRay, the first refusal ends this round of creations: the next ones
                # would meet the same refusal (a quota, an admission policy), and the retry
                # with backoff tries again.
                for skipped in plan.create[index:]:
                    self.expectations.creation_failed(key, str(skipped["metadata"]["name"]))
                # Without the generated name, so the status does not change with every retry.
                add_failure(failures, f"create {kind.lower()} pod: {exc.message.replace(pod_name, '<pod>')}")
                recorder.post(cluster, "Warning", f"FailedToCreate{kind}Pod", exc.message)
                break
            recorder.post(cluster, "Normal", f"Created{kind}Pod", f"Created pod {namespace}/{pod_name}")
        return True
