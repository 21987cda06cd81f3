"""The MultiKueue check controller on the manager's Manager: the worker connections (one per
MultiKueueCluster), the AdmissionChecks' Active condition, the dispatch of each Workload with a
MultiKueue check, and the orphan collection in the workers. Wired by `rayquota.operator.components`
after the queue integration, whose caches it reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.operator.core import Manager, ObjectKey
from rayquota.operator.core.cache.informer import MODIFIED
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.multikueue.checks import MultiKueueChecks
from rayquota.operator.queue.multikueue.clusters import WorkerClusters
from rayquota.operator.queue.multikueue.dispatcher import WorkloadDispatcher
from rayquota.operator.queue.multikueue.orphans import OrphanCollector
from rayquota.operator.queue.multikueue.remote import RemoteWrites
from rayquota.operator.queue.multikueue.settings import Dispatcher, MultiKueueSettings
from rayquota.operator.queue.multikueue.views import check_entry
from rayquota.operator.queue.multikueue.worker import WorkerResources
from rayquota.operator.queue.setup import QueueComponent
from rayquota.operator.queue.workloads.event_filters import object_view


@dataclass(frozen=True)
class MultiKueueComponent:
    settings: MultiKueueSettings
    checks: MultiKueueChecks
    workers: WorkerClusters
    dispatcher: WorkloadDispatcher
    writes: RemoteWrites
    orphans: OrphanCollector


def setup(manager: Manager, queue: QueueComponent, settings: MultiKueueSettings) -> MultiKueueComponent:
    objects = queue.objects
    api = objects.api
    kinds = {kind: a.resource for kind, a in ADAPTERS.items() if a.multicluster is not None}
    resources = WorkerResources(
        api.workloads,
        kinds,
        api.local_queues,
        api.cluster_queues,
        queues=settings.dispatcher is Dispatcher.MOST_FREE_QUOTA,
    )
    writes = RemoteWrites(api.workloads, kinds)

    def remote_changed(key: ObjectKey) -> None:
        controller.enqueue(key)

    def worker_state_changed(_name: str) -> None:
        # A worker came or went: every dispatched workload looks again (a lost worker's clock
        # starts, a returning worker's stale copies go), the checks say who is active.
        for key in dispatcher.keys_with_checks():
            controller.enqueue(key)
        checks.refresh()
        orphans.wake()

    workers = WorkerClusters(
        manager,
        settings,
        manager.informer(api.multikueue_clusters),
        resources,
        remote_changed,
        worker_state_changed,
    )

    def connected(name: str) -> bool:
        worker = workers.get(name)
        return worker is not None and worker.connected

    checks = MultiKueueChecks(
        manager,
        api,
        manager.informer(api.admission_checks),
        manager.informer(api.multikueue_configs),
        connected,
    )
    dispatcher = WorkloadDispatcher(manager, objects, settings, checks, workers, writes)
    controller = manager.controller("multikueue-workloads", dispatcher.reconcile)

    def dispatched(event: str, new: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
        names = set(checks.names())
        return check_entry(new, names) is not None or (
            old is not None and check_entry(old, names) is not None
        )

    controller.watch(objects.workloads, when=dispatched)
    for kind in kinds:
        # The manager's object: deleted (its copies go), or a spec change that may follow it.
        controller.watch(objects.informers[kind], _workload_of(queue, kind), when=_spec_or_deletion)
    controller.watch(checks.configs, lambda _config: dispatcher.keys_with_checks())
    orphans = OrphanCollector(objects.workloads, workers, writes, settings.gc_interval_s)
    manager.add_runnable("multikueue orphans", orphans.run)
    return MultiKueueComponent(settings, checks, workers, dispatcher, writes, orphans)


def _workload_of(queue: QueueComponent, kind: str) -> Any:
    def keys(obj: Mapping[str, Any]) -> list[ObjectKey]:
        owner = queue.objects.queued_owner(kind, obj)
        return [owner.workload] if owner is not None else []

    return keys


def _spec_or_deletion(event: str, new: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    return event != MODIFIED or old is None or object_view(new) != object_view(old)
