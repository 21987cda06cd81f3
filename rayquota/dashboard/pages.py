"""Which page answers an API path, what it needs to know about the user, and its answer.

The same dispatcher serves a plain ``GET /api/...`` and each message of the live channel, so a
page in live mode shows exactly what a reload would show.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rayquota import showback
from rayquota.dashboard.access import Visibility
from rayquota.dashboard.cache import DashboardCache
from rayquota.dashboard.history import HistoryRing
from rayquota.dashboard.prometheus_history import PrometheusHistory
from rayquota.dashboard.queue_model import QueueModel
from rayquota.dashboard.views.cohorts import cohorts_page
from rayquota.dashboard.views.common import Page
from rayquota.dashboard.views.queue_order import QueueScope, local_queue_target, queue_order_page
from rayquota.dashboard.views.ray_objects import ray_objects_page
from rayquota.dashboard.views.workload_page import RayContext, workload_page
from rayquota.operator.core import resources
from rayquota.operator.core.resources import Resource
from rayquota.operator.queue.objects import PARENT_KINDS, RESOURCE_OF_KIND, is_child

NAME = r"[a-z0-9][-a-z0-9.]{0,252}"


class PageError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Request:
    path: str
    query: Mapping[str, str]
    match: Mapping[str, str]


Wanted = dict[Resource, set[str]]
Answer = Callable[[Request, Visibility], dict[str, Any]]


@dataclass(frozen=True)
class Route:
    pattern: re.Pattern[str]
    wanted: Callable[[Request], Wanted]
    """the resources (and namespaces) whose permissions the answer depends on"""
    answer: Answer


class Pages:
    def __init__(
        self,
        cache: DashboardCache,
        model: QueueModel,
        history: HistoryRing,
        prometheus: PrometheusHistory | None = None,
    ) -> None:
        self.cache = cache
        self.model = model
        self.history = history
        self.prometheus = prometheus
        """where the history ring is filled from, when not from the dashboard's own snapshots"""
        api = cache.api
        self.routes = [
            Route(re.compile(r"/api/whoami"), lambda r: {}, self._whoami),
            Route(re.compile(r"/api/cohorts"), lambda r: {api.cluster_queues: set()}, self._cohorts),
            Route(
                re.compile(rf"/api/queues/(?P<cq>{NAME})"),
                lambda r: {api.cluster_queues: set(), api.workloads: self._namespaces_of(api.workloads)},
                self._cluster_queue,
            ),
            Route(
                re.compile(rf"/api/localqueues/(?P<ns>{NAME})/(?P<name>{NAME})"),
                lambda r: {
                    api.local_queues: {r.match["ns"]},
                    api.workloads: self._namespaces_of(api.workloads),
                },
                self._local_queue,
            ),
            Route(
                re.compile(rf"/api/workloads/(?P<ns>{NAME})/(?P<name>{NAME})"),
                self._workload_wanted,
                self._workload,
            ),
            Route(re.compile(r"/api/ray"), self._ray_wanted, self._ray),
            Route(
                re.compile(r"/api/history"),
                lambda r: {
                    api.cluster_queues: set(),
                    api.local_queues: self._namespaces_of(api.local_queues),
                },
                self._history,
            ),
            Route(
                re.compile(r"/api/usage"),
                lambda r: {
                    api.workloads: self._namespaces_of(api.workloads),
                    api.local_queues: self._namespaces_of(api.local_queues),
                },
                self._usage,
            ),
        ]

    # --- dispatch --------------------------------------------------------------------------------

    def route(self, path: str, query: Mapping[str, str]) -> tuple[Route, Request]:
        for route in self.routes:
            match = route.pattern.fullmatch(path)
            if match is not None:
                return route, Request(path, query, match.groupdict())
        raise PageError(404, f"no page at {path}")

    def _namespaces_of(self, resource: Resource) -> set[str]:
        informer = {
            self.cache.api.workloads: self.cache.workloads,
            self.cache.api.local_queues: self.cache.local_queues,
            **{RESOURCE_OF_KIND[k]: i for k, i in self.cache.ray.items() if k in RESOURCE_OF_KIND},
        }.get(resource)
        if informer is None:
            return set(self.cache.namespace_names())
        return {key.namespace for key in informer.store.object_keys()}

    # --- pages -----------------------------------------------------------------------------------

    def _whoami(self, request: Request, visibility: Visibility) -> dict[str, Any]:
        user = visibility.user
        return {"user": user.name, "groups": list(user.groups)}

    def _require(self, visibility: Visibility, resource: Resource, namespace: str | None = None) -> None:
        if not visibility.may_list(resource, namespace):
            where = f" in namespace {namespace}" if namespace else " (cluster-wide)"
            raise PageError(403, f"{visibility.user.name} may not list {resource}{where}")

    def _cohorts(self, request: Request, visibility: Visibility) -> dict[str, Any]:
        self._require(visibility, self.cache.api.cluster_queues)
        page = cohorts_page(self.model.snapshot(), self.cache.cluster_queues.store.list())
        wanted = (request.query.get("name") or "").strip()
        queues = [cq for cq in page["clusterQueues"] if wanted in cq["name"]]
        cut = Page.of(request.query).cut(queues)
        return {**page, "clusterQueues": cut.pop("items"), "paging": cut}

    def _cluster_queue(self, request: Request, visibility: Visibility) -> dict[str, Any]:
        self._require(visibility, self.cache.api.cluster_queues)
        return self._order(request, visibility, QueueScope(request.match["cq"]))

    def _local_queue(self, request: Request, visibility: Visibility) -> dict[str, Any]:
        namespace, name = request.match["ns"], request.match["name"]
        self._require(visibility, self.cache.api.local_queues, namespace)
        local_queue = self.cache.local_queues.store.get(namespace, name)
        target = local_queue_target(local_queue)
        if target is None:
            raise PageError(404, f"LocalQueue {namespace}/{name} not found")
        return self._order(request, visibility, QueueScope(target, (namespace, name)))

    def _order(self, request: Request, visibility: Visibility, scope: QueueScope) -> dict[str, Any]:
        snapshot = self.model.snapshot()
        if scope.cluster_queue not in snapshot.engine.cluster_queue_names():
            raise PageError(404, f"ClusterQueue {scope.cluster_queue} not found")
        page = Page.of(request.query)
        return queue_order_page(snapshot, scope, visibility.namespaces(self.cache.api.workloads), page)

    def _workload_wanted(self, request: Request) -> Wanted:
        namespace = request.match["ns"]
        wanted: Wanted = {self.cache.api.workloads: {namespace}, resources.PODS: {namespace}}
        wanted[resources.EVENTS] = {namespace}
        for kind in self.cache.ray:
            wanted[RESOURCE_OF_KIND[kind]] = {namespace}
        return wanted

    def _workload(self, request: Request, visibility: Visibility) -> dict[str, Any]:
        namespace, name = request.match["ns"], request.match["name"]
        self._require(visibility, self.cache.api.workloads, namespace)
        workload = self.cache.workload(namespace, name)
        if workload is None:
            raise PageError(404, f"Workload {namespace}/{name} not found")
        ray = self._ray_context(workload, visibility)
        return workload_page(
            self.model.snapshot(),
            workload,
            ray,
            visibility.namespaces(self.cache.api.workloads),
            self.cache.records,
        )

    def _ray_context(self, workload: Mapping[str, Any], visibility: Visibility) -> RayContext:
        namespace = str(workload["metadata"]["namespace"])
        refs = workload["metadata"].get("ownerReferences") or []
        uids = [str(workload["metadata"].get("uid") or "")]
        kind = str(refs[0].get("kind")) if refs else None
        obj = None
        if kind in self.cache.ray and visibility.may_list(RESOURCE_OF_KIND[kind], namespace):
            obj = self.cache.ray_object(kind, namespace, str(refs[0].get("name")))
        children: list[Mapping[str, Any]] = []
        pods: list[Mapping[str, Any]] = []
        if obj is not None and kind is not None:
            uid = str(obj["metadata"].get("uid") or "")
            uids.append(uid)
            if kind in PARENT_KINDS:
                children = [c for c in self.cache.owned("RayCluster", uid) if is_child(c)]
            clusters = children if kind in PARENT_KINDS else [obj]
            uids += [str(c["metadata"].get("uid") or "") for c in children]
            if visibility.may_list(resources.PODS, namespace):
                for cluster in clusters:
                    pods += self.cache.pods_of_cluster(namespace, str(cluster["metadata"]["name"]))
        events = self.cache.events_of(*uids) if visibility.may_list(resources.EVENTS, namespace) else []
        return RayContext(kind if obj is not None else None, obj, children, pods, events)

    def _ray_wanted(self, request: Request) -> Wanted:
        wanted: Wanted = {self.cache.api.workloads: self._namespaces_of(self.cache.api.workloads)}
        for kind in self.cache.ray:
            wanted[RESOURCE_OF_KIND[kind]] = self._namespaces_of(RESOURCE_OF_KIND[kind])
        return wanted

    def _ray(self, request: Request, visibility: Visibility) -> dict[str, Any]:
        objects = {}
        for kind, informer in self.cache.ray.items():
            allowed = visibility.namespaces(RESOURCE_OF_KIND[kind])
            objects[kind] = [
                o
                for o in informer.store.list()
                if allowed is None or o["metadata"].get("namespace") in allowed
            ]
        workloads = visibility.namespaces(self.cache.api.workloads)

        def workload_of(kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
            if workloads is not None and namespace not in workloads:
                return None
            return self.cache.workload_of(kind, namespace, name)

        kind_filter = request.query.get("kind") or None
        if kind_filter and kind_filter not in self.cache.ray:
            raise PageError(400, f"kind={kind_filter!r}: expected one of {', '.join(sorted(self.cache.ray))}")
        rows = ray_objects_page(objects, workload_of, kind_filter, request.query.get("namespace") or None)
        cut = Page.of(request.query).cut(rows)
        return {"kinds": sorted(self.cache.ray), "objects": cut.pop("items"), "paging": cut}

    def _history(self, request: Request, visibility: Visibility) -> dict[str, Any]:
        names: set[str] | None = None
        if not visibility.may_list(self.cache.api.cluster_queues):
            allowed = visibility.namespaces(self.cache.api.local_queues) or frozenset()
            names = {
                str(target)
                for lq in self.cache.local_queues.store.list()
                if lq["metadata"].get("namespace") in allowed and (target := local_queue_target(lq))
            }
        raw_hours = request.query.get("hours") or str(self.history.hours)
        try:
            hours = float(raw_hours)
        except ValueError:
            raise PageError(400, f"hours={raw_hours!r}: expected a number") from None
        view = self.history.view(names, since=time.time() - hours * 3600)
        if self.prometheus is None:
            return {**view, "source": {"kind": "dashboard"}}
        return {**view, "source": {"kind": "prometheus", "error": self.prometheus.error}}

    def _usage(self, request: Request, visibility: Visibility) -> dict[str, Any]:
        """Showback (:mod:`rayquota.showback`) over the Workloads the user may list; with
        ``format=csv`` the answer also carries the CSV text the server sends instead."""
        query = request.query
        since, until = showback.window(
            query.get("since") or "24h", query.get("until") or None, time.time(), ""
        )
        by = query.get("by") or "clusterqueue"
        if by not in showback.GROUPINGS:
            raise PageError(400, f"by={by!r}: expected one of {', '.join(showback.GROUPINGS)}")
        allowed = visibility.namespaces(self.cache.api.workloads)
        workloads = [
            w
            for w in self.cache.workloads.store.list()
            if allowed is None or w["metadata"].get("namespace") in allowed
        ]
        report = showback.usage_report(workloads, self.cache.local_queues.store.list(), since, until, by)
        fmt = query.get("format") or "json"
        if fmt not in ("json", "csv"):
            raise PageError(400, f"format={fmt!r}: expected json or csv")
        return {**report, "csv": showback.report_csv(report)} if fmt == "csv" else report
