"""Sampling a manager and its workers side by side, throughout a test: in one namespace, which
Ray jobs have running pods in which cluster, which Workloads each cluster holds and admits, which
workers the manager's Workloads name (nominated or chosen), and which clusters did not answer.
Polling (each cluster asked in turn, a short timeout each), so a stopped API server shows as a
gap, never as an empty cluster. The manager is asked last in each sample: it records a
nomination before it makes a copy, so a copy seen in a worker is named in the manager's answer."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client, config

from tests.integration.ray.kubehelpers import condition


@dataclass(frozen=True)
class ClusterState:
    running: Mapping[str, int]  # Ray job (or Job) name -> its Running pods there
    admitted: frozenset[str]  # Workloads admitted there (Admitted=True, not finished)
    held: frozenset[str] = frozenset()  # every Workload there (a worker's: the copies it holds)
    # Workload name -> the workers its status names: nominatedClusterNames and clusterName.
    named: Mapping[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Sample:
    at: float  # time.monotonic()
    clusters: Mapping[str, ClusterState | None]  # None: the cluster did not answer


def _owner(pod: Mapping[str, Any]) -> str | None:
    labels = pod["metadata"].get("labels") or {}
    cluster = labels.get("ray.io/cluster")
    if cluster:
        return str(cluster).rsplit("-", 1)[0]  # <rayjob>-<suffix>
    job = labels.get("batch.kubernetes.io/job-name")
    return str(job) if job else None


def _named(workload: Mapping[str, Any]) -> frozenset[str]:
    status = workload.get("status") or {}
    chosen = status.get("clusterName")
    return frozenset([*(status.get("nominatedClusterNames") or ()), *([chosen] if chosen else [])])


def _client(kubeconfig: str) -> client.ApiClient:
    """A client that asks once: a stopped API server is a gap in the samples, not a stall."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    configuration.retries = False
    return client.ApiClient(configuration)


@dataclass
class FleetSampler:
    kubeconfigs: Mapping[str, str]
    namespace: str
    interval_s: float = 0.3
    manager: str = "manager"  # asked last in each sample
    samples: list[Sample] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._apis = {name: _client(path) for name, path in self.kubeconfigs.items()}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="fleet-sampler", daemon=True)

    def start(self) -> FleetSampler:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        for api in self._apis.values():
            api.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            order = sorted(self._apis, key=lambda name: name == self.manager)
            sample = Sample(time.monotonic(), {name: self._state(self._apis[name]) for name in order})
            with self._lock:
                self.samples.append(sample)
            self._stop.wait(self.interval_s)

    def _state(self, api: client.ApiClient) -> ClusterState | None:
        try:
            pods = client.CoreV1Api(api).list_namespaced_pod(
                self.namespace, _request_timeout=2, _preload_content=False
            )
            workloads = client.CustomObjectsApi(api).list_namespaced_custom_object(
                "rayquota.io",
                "v1alpha1",
                self.namespace,
                "workloads",
                _request_timeout=2,
                _preload_content=False,
            )
        except Exception:  # refused, timed out: this cluster did not answer this time
            return None
        running: dict[str, int] = {}
        for pod in json.loads(pods.data)["items"]:
            owner = _owner(pod)
            if (
                owner
                and (pod.get("status") or {}).get("phase") == "Running"
                and not pod["metadata"].get("deletionTimestamp")
            ):
                running[owner] = running.get(owner, 0) + 1
        items = json.loads(workloads.data)["items"]
        admitted = frozenset(
            str(wl["metadata"]["name"])
            for wl in items
            if (condition(wl, "Admitted") or {}).get("status") == "True"
            and (condition(wl, "Finished") or {}).get("status") != "True"
        )
        held = frozenset(str(wl["metadata"]["name"]) for wl in items)
        return ClusterState(
            running, admitted, held, {str(wl["metadata"]["name"]): _named(wl) for wl in items}
        )

    def holders(self, sample: Sample, workload: str) -> set[str]:
        """The workers that hold a copy of the manager's Workload in this sample."""
        return {
            name
            for name, state in sample.clusters.items()
            if name != self.manager and state is not None and workload in state.held
        }

    def named(self, sample: Sample, workload: str) -> frozenset[str] | None:
        """The workers the manager's Workload names in this sample (None: the manager did not
        answer, or has no such Workload yet)."""
        state = sample.clusters.get(self.manager)
        return None if state is None or workload not in state.named else state.named[workload]

    def taken(self) -> list[Sample]:
        with self._lock:
            return list(self.samples)

    def where_running(self, sample: Sample, job: str) -> set[str]:
        return {
            name for name, state in sample.clusters.items() if state is not None and state.running.get(job)
        }

    def double_runs(
        self, jobs: list[str], *, unless: frozenset[str] = frozenset()
    ) -> list[tuple[float, str, set[str]]]:
        """Samples in which a job had running pods in two clusters (ignoring those in ``unless``)."""
        found = []
        for sample in self.taken():
            for job in jobs:
                clusters = self.where_running(sample, job) - unless
                if len(clusters) > 1:
                    found.append((sample.at, job, clusters))
        return found
