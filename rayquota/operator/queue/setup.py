"""The queue integration on the shared manager: informers, the Workload controller, the
admission loop, queue status, and the gate the RayCluster planner asks.

It is handed the Ray reconcilers (None in admission-only mode, where KubeRay's operator
reconciles the Ray objects): they look again when a Workload they depend on changes."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.operator.core import Manager, ObjectKey, resources
from rayquota.operator.core.cache.informer import DELETED, Informer
from rayquota.operator.core.controller import Controller
from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import (
    ADAPTERS,
    KindAdapter,
    PodWatch,
    disabled_frameworks,
    pod_watches,
    registry,
)
from rayquota.operator.queue.adapters.capabilities import RunsItsOwnCluster
from rayquota.operator.queue.adapters.rayjob import RayJobAdapter
from rayquota.operator.queue.adapters.rayservice import RayServiceAdapter
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.admission.admission_loop import AdmissionLoop
from rayquota.operator.queue.admission.finalizers import InUseFinalizers
from rayquota.operator.queue.admission.manual_check import ManualChecks
from rayquota.operator.queue.admission.topology_feed import BOUND_AND_RUNNING, TopologyFeed
from rayquota.operator.queue.dra.cache import ClaimCache
from rayquota.operator.queue.gating.gate import QueueGate
from rayquota.operator.queue.gating.job_pod_ungater import JobPodUngater
from rayquota.operator.queue.gating.pod_ungater import PodUngater
from rayquota.operator.queue.kueue.api_group import KUEUE_MODE, QueueApi, of_mode
from rayquota.operator.queue.multikueue.queues import DispatchingQueues
from rayquota.operator.queue.objects import QueueObjects
from rayquota.operator.queue.settings import QueueConfig
from rayquota.operator.queue.status import QueueStatusWriter
from rayquota.operator.queue.workloads import event_filters
from rayquota.operator.queue.workloads.release_events import (
    enqueue_first_when_freeing,
    enqueue_first_when_pod_leaves,
    enqueue_soon_when_new,
)
from rayquota.operator.queue.workloads.workload_reconciler import WorkloadReconciler
from rayquota.operator.ray.setup import RayControllers
from rayquota.queueing import RequeuingTimestamp

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueueComponent:
    objects: QueueObjects
    loop: AdmissionLoop
    reconciler: WorkloadReconciler
    gate: QueueGate
    dispatching: DispatchingQueues
    """Which LocalQueues dispatch to worker clusters (MultiKueue): the webhook says so on objects."""


def setup(manager: Manager, ray: RayControllers | None, config: QueueConfig) -> QueueComponent:
    """`config`: the queue integration's settings, from the operator's configuration."""
    settings = config.labels
    api = of_mode(config.api_mode)
    # Admission-only mode (no Ray reconcilers here): KubeRay's operator builds the clusters and
    # pods, and the records of that mode say which it holds at their pods.
    # The claim source every demand read counts DRA claims from: the records, the quantity
    # check, the gate and the caps are each handed it (queue/dra/cache.py).
    claims = ClaimCache.register(manager, settings.dra)
    records = _records(ray is None, api.mode == KUEUE_MODE, claims, config.frameworks)
    objects = QueueObjects.register(manager, settings, api, records, claims)
    ready = config.wait_for_pods_ready
    loop = AdmissionLoop(
        fair_sharing=config.fair_sharing,
        admission_fair_sharing=config.admission_fair_sharing,
        requeuing_timestamp=ready.requeuing_timestamp if ready is not None else RequeuingTimestamp.EVICTION,
    )
    # The RayCluster planner's pods that the cache does not show yet (none in admission-only mode).
    in_flight = ray.clusters.pods_in_flight if ray is not None else None
    reconciler = WorkloadReconciler(manager, objects, loop, config.wait_for_pods_ready, in_flight)
    controller = manager.controller("workload", reconciler.reconcile)
    loop.writer.enqueue = controller.enqueue
    loop.writer.enqueue_first = controller.enqueue_first
    _watch_for_workloads(controller, objects, reconciler, loop, records)
    config_informers = _watch_queue_config(manager, api, loop, reconciler, objects)
    _watch_topology_and_priorities(manager, api, loop, objects)
    if api.workload_status_manager is not None:
        manager.status.apply_as[api.workloads] = api.workload_status_manager
    if ray is not None:
        _watch_workloads_for_ray(ray, objects)
    gate = _register_gate(manager, ray, objects, reconciler, loop)
    manager.add_runnable("admission loop", lambda: loop.run(lambda: objects.workloads.store.list()))
    status = QueueStatusWriter(
        manager,
        loop.driver.engine,
        config_informers["ClusterQueue"],
        config_informers["LocalQueue"],
        objects.workloads,
        api,
        cohorts=config_informers["Cohort"],
    )
    manager.add_runnable("queue status", status.run)
    dispatching = DispatchingQueues(
        config_informers["LocalQueue"], config_informers["ClusterQueue"], config_informers["AdmissionCheck"]
    )
    return QueueComponent(objects, loop, reconciler, gate, dispatching)


def _watch_for_workloads(
    controller: Controller,
    objects: QueueObjects,
    reconciler: WorkloadReconciler,
    loop: AdmissionLoop,
    records: Mapping[str, KindAdapter],
) -> None:
    """The Workload controller looks again when a Workload, a queued object or one of its pods
    changes (first in line when quota may be freed)."""

    def mapped(kind: str) -> Any:
        def keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
            owner = objects.queued_owner(kind, obj)
            return [owner.workload] if owner is not None else []

        return keys

    def pod_mapper(watch: PodWatch) -> Any:
        def keys(pod: Mapping[str, Any]) -> list[ObjectKey]:
            owner = objects.pod_owner(watch, pod)
            if owner is not None:
                found: list[ObjectKey] = mapped(watch.owner_kind)(owner)
                return found
            # A deleted owner's pods still held quota: when the last one goes, the Workloads that
            # counted them must look again (shrink, or release) though the owner is not cached.
            return [
                key
                for index in watch.index(pod)
                for key in reconciler.workloads_counting((watch.name, index))
            ]

        return keys

    objects.workloads.on_change(reconciler.standalone.on_change)
    controller.watch(objects.workloads)
    objects.workloads.on_change(enqueue_first_when_freeing(controller.enqueue_first))
    for kind, informer in objects.informers.items():
        informer.on_change(reconciler.creation_versions.on_change)
        controller.watch(informer, mapped(kind), when=ADAPTERS[kind].change_filter)
        informer.on_change(enqueue_soon_when_new(kind, objects, controller.enqueue_soon))

    def holds_quota(key: ObjectKey) -> bool:
        return loop.driver.admission(str(key)) is not None or loop.driver.is_evicting(str(key))

    for watch in pod_watches(records):
        informer = objects.pod_informers[watch.name]
        controller.watch(informer, pod_mapper(watch), when=event_filters.pod_changed)
        informer.on_change(
            enqueue_first_when_pod_leaves(pod_mapper(watch), holds_quota, controller.enqueue_first)
        )


def _watch_queue_config(
    manager: Manager,
    api: QueueApi,
    loop: AdmissionLoop,
    reconciler: WorkloadReconciler,
    objects: QueueObjects,
) -> dict[str, Informer]:
    """The informers of the queue configuration (flavors, queues, cohorts, checks) by kind, fed
    to the admission loop, with the finalizers and manual checks that read them."""
    config_informers = {
        "ResourceFlavor": manager.informer(api.resource_flavors),
        "ClusterQueue": manager.informer(api.cluster_queues, interned=True),
        "Cohort": manager.informer(api.cohorts),
        "LocalQueue": manager.informer(api.local_queues, interned=True),
        "AdmissionCheck": manager.informer(api.admission_checks),
    }
    for kind, informer in config_informers.items():
        informer.on_change(loop.on_config(kind))
    config_informers["ResourceFlavor"].on_change(_keep_flavors(reconciler))
    config_informers["LocalQueue"].on_change(_track_default_queues(objects))
    InUseFinalizers(
        manager, api, loop, config_informers["ClusterQueue"], config_informers["ResourceFlavor"]
    ).register()
    ManualChecks(manager, api, config_informers["AdmissionCheck"], objects.workloads).register()
    manager.informer(resources.NAMESPACES).on_change(loop.on_namespace)
    return config_informers


def _watch_topology_and_priorities(
    manager: Manager, api: QueueApi, loop: AdmissionLoop, objects: QueueObjects
) -> None:
    # Topology-aware admission: the domains' room, from the Topologies, the Nodes and the pods
    # bound to them (all of them: a DaemonSet's pods take room too).
    feed = TopologyFeed(loop.driver.engine, loop.request_cycle, objects.workload_of_pod)
    manager.informer(api.topologies).on_change(feed.on_topology)
    manager.informer(resources.NODES).on_change(feed.on_node)
    manager.informer(resources.PODS, field_selector=BOUND_AND_RUNNING).on_change(feed.on_pod)
    manager.informer(api.workload_priority_classes).on_change(loop.on_priority_class)
    # Kueue's fallback when no WorkloadPriorityClass is named: the pods' PriorityClass.
    manager.informer(resources.PRIORITY_CLASSES).on_change(loop.priority_classes.on_pod_class)


def _watch_workloads_for_ray(ray: RayControllers, objects: QueueObjects) -> None:
    """The gate reads the cached Workloads: when one changes, the clusters it covers look again."""

    def clusters_of_workload(workload: Mapping[str, Any]) -> list[ObjectKey]:
        queued = objects.owner_of_workload(ObjectKey.of(workload))
        if queued is None:
            return []
        if isinstance(queued.adapter, RunsItsOwnCluster):
            return [ObjectKey.of(queued.obj)]
        return [ObjectKey.of(c) for c in objects.children(queued.kind, queued.obj)]

    ray.clusters.controller.watch(objects.workloads, clusters_of_workload, primary=False)

    # The Ray objects' QuotaReserved condition repeats the Workload's verdict.
    def owner_of_kind(kind: str) -> Any:
        def keys(workload: Mapping[str, Any]) -> list[ObjectKey]:
            queued = objects.owner_of_workload(ObjectKey.of(workload))
            return [ObjectKey.of(queued.obj)] if queued is not None and queued.kind == kind else []

        return keys

    ray.jobs.controller.watch(objects.workloads, owner_of_kind(RayJobAdapter.kind), primary=False)
    ray.services.controller.watch(objects.workloads, owner_of_kind(RayServiceAdapter.kind), primary=False)


def _register_gate(
    manager: Manager,
    ray: RayControllers | None,
    objects: QueueObjects,
    reconciler: WorkloadReconciler,
    loop: AdmissionLoop,
) -> QueueGate:
    """The gate pods and the RayCluster planner ask what they may be, and the ungaters it drives."""

    def decided_counts(key: ObjectKey) -> Mapping[str, int] | None:
        admission = loop.driver.admission(str(key))
        return None if admission is None else admission.counts()

    gate = QueueGate(objects, reconciler.flavors, reconciler.parts_of, decided_counts)
    manager.gate = gate
    # A Job's pods (a queued Job's, a RayJob's submitter's) held for their topology domains.
    JobPodUngater(manager, objects, gate).register()
    if ray is None:
        PodUngater(manager, objects, gate).register()
    else:
        ray.clusters.caps = gate  # the RayCluster planner's port: what each cluster's pods may be
    return gate


def _records(
    beside_kuberay: bool, kueue_api: bool, claims: ClaimCache, frameworks: tuple[str, ...] | None
) -> dict[str, KindAdapter]:
    """The records of the mode it runs in that ``integrations.frameworks`` turns on; each
    optional integration it leaves off is said in the log, by Kueue's name."""
    for framework in disabled_frameworks(frameworks):
        log.info("integration %s is off: integrations.frameworks does not name it", framework)
    return registry(beside_kuberay, kueue_api, claims, frameworks)


def _keep_flavors(reconciler: WorkloadReconciler) -> Any:
    def handle(event: str, obj: Mapping[str, Any], _old: Mapping[str, Any] | None) -> None:
        name = str(obj["metadata"]["name"])
        if event == DELETED:
            reconciler.flavors.pop(name, None)
        else:
            reconciler.flavors[name] = converter.resource_flavor(obj)

    return handle


def _track_default_queues(objects: QueueObjects) -> Any:
    """manageJobsWithoutQueueName: a namespace with a LocalQueue named ``default`` queues
    unlabelled objects created since it exists there."""

    def handle(event: str, obj: Mapping[str, Any], _old: Mapping[str, Any] | None) -> None:
        if obj["metadata"]["name"] != naming.DEFAULT_LOCAL_QUEUE:
            return
        namespace = str(obj["metadata"]["namespace"])
        if event == DELETED:
            objects.default_queues_since.pop(namespace, None)
        else:
            objects.default_queues_since[namespace] = str(obj["metadata"].get("creationTimestamp") or "")

    return handle
