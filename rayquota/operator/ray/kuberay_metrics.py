"""KubeRay v1.7.0's control-plane metrics, under KubeRay's names and labels, beside ours.

So KubeRay's dashboards and alerts keep working after a migration. As KubeRay does:

- `kuberay_{cluster,job,service}_info` and the condition / status families are read off the
  current objects at every scrape (one series per object, value 1, the state in a label);
- `kuberay_cluster_provisioned_duration_seconds` is set when a RayCluster's RayClusterProvisioned
  condition turns true (seconds since its creation), `kuberay_job_execution_duration_seconds`
  when a RayJob leaves a non-terminal state for Complete, Failed or Retrying (seconds since its
  status.startTime); both are dropped with their object.

KubeRay observes transitions when it writes a status; here they are seen on the watch (old and
new object), which covers our reconcilers' writes and nothing else can write these statuses.
Only the leader's informers run, so standbys report nothing and a sum over replicas counts
each object once. Scrapes run on the metrics server's thread: the series live behind a lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rayquota.api.ray_v1 import JobDeploymentStatus, RayClusterConditionType, RayServiceConditionType
from rayquota.operator.core import DELETED, Informer, ObjectKey
from rayquota.operator.core.timestamps import parse_rfc3339
from rayquota.operator.ray.vocabulary import conditions, labels

IDENTITY = ("name", "namespace", "uid")
TERMINAL = (JobDeploymentStatus.COMPLETE.value, JobDeploymentStatus.FAILED.value)
RETRYING = JobDeploymentStatus.RETRYING.value


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    labels: tuple[str, ...]


CLUSTER_INFO = Family(
    "kuberay_cluster_info",
    "One series per RayCluster (value 1); owner_kind is RayJob, RayService or None",
    (*IDENTITY, "owner_kind"),
)
CLUSTER_PROVISIONED = Family(
    "kuberay_cluster_condition_provisioned",
    "One series per RayCluster (value 1); condition is whether RayClusterProvisioned is true",
    (*IDENTITY, "condition"),
)
CLUSTER_PROVISIONED_DURATION = Family(
    "kuberay_cluster_provisioned_duration_seconds",
    "Seconds from a RayCluster's creation until its RayClusterProvisioned condition turned true",
    IDENTITY,
)
JOB_INFO = Family("kuberay_job_info", "One series per RayJob (value 1)", IDENTITY)
JOB_DEPLOYMENT_STATUS = Family(
    "kuberay_job_deployment_status",
    "One series per RayJob (value 1); deployment_status is its status.jobDeploymentStatus",
    (*IDENTITY, "deployment_status"),
)
JOB_EXECUTION_DURATION = Family(
    "kuberay_job_execution_duration_seconds",
    "Seconds from a RayJob attempt's start (status.startTime) until it ended: Complete, Failed, or "
    "Retrying after a failure (retry_count: the failures before it)",
    (*IDENTITY, "job_deployment_status", "retry_count"),
)
SERVICE_INFO = Family("kuberay_service_info", "One series per RayService (value 1)", IDENTITY)
SERVICE_READY = Family(
    "kuberay_service_condition_ready",
    "One series per RayService (value 1); condition is whether its Ready condition is true (it serves "
    "requests through at least one endpoint)",
    (*IDENTITY, "condition"),
)
SERVICE_UPGRADING = Family(
    "kuberay_service_condition_upgrade_in_progress",
    "One series per RayService (value 1); condition is whether a zero-downtime upgrade is under way",
    (*IDENTITY, "condition"),
)
FAMILIES = (
    CLUSTER_INFO,
    CLUSTER_PROVISIONED,
    CLUSTER_PROVISIONED_DURATION,
    JOB_INFO,
    JOB_DEPLOYMENT_STATUS,
    JOB_EXECUTION_DURATION,
    SERVICE_INFO,
    SERVICE_READY,
    SERVICE_UPGRADING,
)

Labels = tuple[str, ...]


def _identity(obj: Mapping[str, Any]) -> Labels:
    meta = obj["metadata"]
    return (str(meta["name"]), str(meta.get("namespace") or ""), str(meta.get("uid") or ""))


def _conditions(obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return list(((obj or {}).get("status") or {}).get("conditions") or [])


def _flag(value: bool) -> str:
    return "true" if value else "false"


def cluster_series(cluster: Mapping[str, Any]) -> dict[Family, Labels]:
    owner = (cluster["metadata"].get("labels") or {}).get(labels.ORIGINATED_FROM_CRD) or "None"
    provisioned = conditions.is_true(_conditions(cluster), RayClusterConditionType.PROVISIONED.value)
    return {
        CLUSTER_INFO: (*_identity(cluster), str(owner)),
        CLUSTER_PROVISIONED: (*_identity(cluster), _flag(provisioned)),
    }


def job_series(rayjob: Mapping[str, Any]) -> dict[Family, Labels]:
    deployment = str((rayjob.get("status") or {}).get("jobDeploymentStatus") or "")
    return {JOB_INFO: _identity(rayjob), JOB_DEPLOYMENT_STATUS: (*_identity(rayjob), deployment)}


def service_series(service: Mapping[str, Any]) -> dict[Family, Labels]:
    conds = _conditions(service)
    ready = conditions.is_true(conds, RayServiceConditionType.READY.value)
    upgrading = conditions.is_true(conds, RayServiceConditionType.UPGRADE_IN_PROGRESS.value)
    return {
        SERVICE_INFO: _identity(service),
        SERVICE_READY: (*_identity(service), _flag(ready)),
        SERVICE_UPGRADING: (*_identity(service), _flag(upgrading)),
    }


def provisioned_duration(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], now: float
) -> tuple[Labels, float] | None:
    """(labels, seconds) when this change makes the cluster provisioned."""
    kind = RayClusterConditionType.PROVISIONED.value
    if (
        old is None
        or conditions.is_true(_conditions(old), kind)
        or not conditions.is_true(_conditions(new), kind)
    ):
        return None
    created = parse_rfc3339(new["metadata"].get("creationTimestamp"))
    return None if created is None else (_identity(new), now - created.timestamp())


def execution_duration(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], now: float
) -> tuple[Labels, float] | None:
    """(labels, seconds) when this change ends a RayJob's attempt (terminal or Retrying)."""
    if old is None:
        return None
    before, after = old.get("status") or {}, new.get("status") or {}
    state = str(after.get("jobDeploymentStatus") or "")
    if before.get("jobDeploymentStatus") in TERMINAL or (state not in TERMINAL and state != RETRYING):
        return None
    started = parse_rfc3339(after.get("startTime"))
    if started is None:
        return None
    retries = int(before.get("failed") or 0)
    return (*_identity(new), state, str(retries)), now - started.timestamp()


SeriesOf = Callable[[Mapping[str, Any]], dict[Family, Labels]]
Transition = Callable[[Mapping[str, Any] | None, Mapping[str, Any], float], "tuple[Labels, float] | None"]


class KubeRayMetrics(Collector):
    """A Prometheus collector fed by the Ray informers (`watch`); register it where metrics are
    served."""

    def __init__(self, wall_clock: Callable[[], float] = time.time) -> None:
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        # Per object: the series that describe it now (value 1).
        self._current: dict[tuple[str, ObjectKey], dict[Family, Labels]] = {}
        # Per object: the durations observed on it, by family and labels.
        self._durations: dict[tuple[str, ObjectKey], dict[tuple[Family, Labels], float]] = {}

    def watch(self, clusters: Informer, jobs: Informer, services: Informer) -> None:
        clusters.on_change(
            self._handler("RayCluster", cluster_series, CLUSTER_PROVISIONED_DURATION, provisioned_duration)
        )
        jobs.on_change(self._handler("RayJob", job_series, JOB_EXECUTION_DURATION, execution_duration))
        services.on_change(self._handler("RayService", service_series, None, None))

    def _handler(
        self, kind: str, series_of: SeriesOf, duration: Family | None, transition: Transition | None
    ) -> Callable[[str, dict[str, Any], dict[str, Any] | None], None]:
        def handle(event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            key = (kind, ObjectKey.of(obj))
            if event == DELETED:
                with self._lock:
                    self._current.pop(key, None)
                    self._durations.pop(key, None)
                return
            series = series_of(obj)
            observed = transition(old, obj, self._wall_clock()) if transition is not None else None
            with self._lock:
                self._current[key] = series
                if observed is not None and duration is not None:
                    labels_, seconds = observed
                    self._durations.setdefault(key, {})[(duration, labels_)] = seconds

        return handle

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(f.name, f.help, labels=list(f.labels)) for f in FAMILIES]

    def collect(self) -> Iterator[Metric]:
        families = {f: GaugeMetricFamily(f.name, f.help, labels=list(f.labels)) for f in FAMILIES}
        with self._lock:
            current = [series for per_object in self._current.values() for series in per_object.items()]
            durations = [item for per_object in self._durations.values() for item in per_object.items()]
        for family, labels_ in current:
            families[family].add_metric(list(labels_), 1.0)
        for (family, labels_), seconds in durations:
            families[family].add_metric(list(labels_), seconds)
        yield from families.values()
