"""Watching one namespace so that the gate's invariants (tests/gate_invariants.py) can be
judged at every state the API server went through, not only at the end.

A :class:`GateSampler` watches, in one namespace, the pods, the Workloads, the RayClusters, the
Jobs, the RayJobs and RayServices (and, asked to, the JobSets), and the ClusterQueue they are
admitted to. Every version of every object is kept with its ``resourceVersion``; the local
control plane's resourceVersions are etcd revisions, one counter for all kinds, so sorting the
versions by it replays the states in the order the API server stored them (two watches may
deliver them in another order, and a sampler that judged on arrival would see quota released
"before" the pods went). Tests also wait on what it watched, which costs the API server nothing.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from tests.gate_invariants import COVERED, FlavorPlacement, Judge, State, Version

GROUP, VERSION = "rayquota.io", "v1alpha1"


@dataclass
class _Feed:
    """One watch: its versions so far and the latest state it has shown."""

    kind: str
    list_fn: Callable[..., Any]
    args: tuple[Any, ...]
    versions: list[Version] = field(default_factory=list)
    latest: dict[str, int] = field(default_factory=dict)  # name -> revision
    objects: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # name -> latest version
    newest: int = 0  # the highest revision it has delivered
    gaps: int = 0


class GateSampler:
    """Watches one namespace (and its ClusterQueue) from :meth:`start` to :meth:`stop`."""

    def __init__(
        self,
        kubeconfig: str,
        namespace: str,
        cluster_queue: str,
        placement: FlavorPlacement | None,
        covered: tuple[str, ...] = COVERED,
        queue_api: tuple[str, str] = (GROUP, VERSION),
        device_classes: Mapping[str, str] | None = None,
        jobsets: bool = False,
    ) -> None:
        """``queue_api``: the group and version of the Workloads and ClusterQueue watched
        (``("kueue.x-k8s.io", "v1beta2")`` in Kueue-API mode). ``device_classes`` (DeviceClass ->
        quota resource, as ``resources.deviceClassMappings``): the namespace's ResourceClaims are
        watched too, and the devices allocated to a live pod's claims count as the mapped
        resource (name it in ``covered`` to judge it). ``jobsets``: the namespace's JobSets are
        watched too (their CRD must be installed), so that their Jobs and pods are judged
        against their admission."""
        self.namespace, self.cluster_queue = namespace, cluster_queue
        group, version = queue_api
        self.api = config.new_client_from_config(config_file=kubeconfig)
        core, custom, batch = (
            client.CoreV1Api(self.api),
            client.CustomObjectsApi(self.api),
            client.BatchV1Api(self.api),
        )
        ns = namespace
        self.feeds = [
            _Feed("Pod", core.list_namespaced_pod, (ns,)),
            _Feed("Workload", custom.list_namespaced_custom_object, (group, version, ns, "workloads")),
            _Feed("RayCluster", custom.list_namespaced_custom_object, ("ray.io", "v1", ns, "rayclusters")),
            _Feed("Job", batch.list_namespaced_job, (ns,)),
            _Feed("ClusterQueue", custom.list_cluster_custom_object, (group, version, "clusterqueues")),
            # Not judged: watched so that tests can wait on them without asking the API server.
            _Feed("RayJob", custom.list_namespaced_custom_object, ("ray.io", "v1", ns, "rayjobs")),
            _Feed("RayService", custom.list_namespaced_custom_object, ("ray.io", "v1", ns, "rayservices")),
        ]
        if jobsets:
            self.feeds.append(
                _Feed(
                    "JobSet",
                    custom.list_namespaced_custom_object,
                    ("jobset.x-k8s.io", "v1alpha2", ns, "jobsets"),
                )
            )
        if device_classes is not None:
            self.feeds.append(
                _Feed(
                    "ResourceClaim",
                    custom.list_namespaced_custom_object,
                    ("resource.k8s.io", "v1", ns, "resourceclaims"),
                )
            )
        nodes = {n.metadata.name: dict(n.metadata.labels or {}) for n in core.list_node().items}
        self.judge = Judge(cluster_queue, placement, nodes, covered, dict(device_classes or {}))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.judged_up_to = 0  # states after this revision may still miss a watch's events
        self._forgiven: list[Callable[[Version], bool]] = []

    # --- watching ---------------------------------------------------------------------------

    def start(self) -> GateSampler:
        for feed in self.feeds:
            thread = threading.Thread(
                target=self._follow, args=(feed,), name=f"sampler-{feed.kind}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def _list(self, feed: _Feed) -> tuple[str, list[dict[str, Any]]]:
        raw = feed.list_fn(*feed.args, _preload_content=False)
        body = json.loads(raw.data)
        return str(body["metadata"]["resourceVersion"]), list(body.get("items") or [])

    def _record(self, feed: _Feed, kind_of_event: str, obj: dict[str, Any]) -> None:
        if feed.kind == "ClusterQueue" and obj["metadata"]["name"] != self.cluster_queue:
            return
        revision = int(obj["metadata"]["resourceVersion"])
        with self._lock:
            feed.newest = max(feed.newest, revision)
            feed.versions.append(Version(revision, feed.kind, kind_of_event == "DELETED", obj))
            if kind_of_event == "DELETED":
                feed.latest.pop(obj["metadata"]["name"], None)
                feed.objects.pop(obj["metadata"]["name"], None)
            else:
                feed.latest[obj["metadata"]["name"]] = revision
                feed.objects[obj["metadata"]["name"]] = obj

    def _follow(self, feed: _Feed) -> None:
        resource_version, items = self._list(feed)
        for item in items:
            self._record(feed, "ADDED", item)
        while not self._stop.is_set():
            stream = watch.Watch()
            try:
                for event in stream.stream(
                    feed.list_fn,
                    *feed.args,
                    resource_version=resource_version,
                    timeout_seconds=5,
                    deserialize=False,
                ):
                    if event["type"] == "ERROR":
                        raise ApiException(status=int(event["object"].get("code") or 500))
                    if event["type"] == "BOOKMARK":
                        continue
                    self._record(feed, event["type"], event["object"])
                    resource_version = event["object"]["metadata"]["resourceVersion"]
                    if self._stop.is_set():
                        break
            except ApiException as exc:
                if exc.status != 410:
                    time.sleep(0.2)
                    continue
                # Too old to resume: list again (states in between are lost, and said so).
                with self._lock:
                    feed.gaps += 1
                resource_version, items = self._list(feed)
                for item in items:
                    self._record(feed, "MODIFIED", item)
            except Exception:  # connection reset under load: resume from the last version
                if not self._stop.is_set():
                    time.sleep(0.2)

    def _complete_up_to(self) -> int | None:
        """A revision up to which every watch has delivered everything (None: not yet). A watch
        is complete up to a fresh list's revision once it has delivered something newer, or
        shows exactly the listed state."""
        barrier: int | None = None
        for feed in self.feeds:
            listed_at, items = self._list(feed)
            if feed.kind == "ClusterQueue":
                items = [i for i in items if i["metadata"]["name"] == self.cluster_queue]
            listed = {i["metadata"]["name"]: int(i["metadata"]["resourceVersion"]) for i in items}
            with self._lock:
                if feed.newest < int(listed_at) and listed != feed.latest:
                    return None
            barrier = int(listed_at) if barrier is None else min(barrier, int(listed_at))
        return barrier

    def sync(self, timeout_s: float = 60) -> int:
        """Wait until the watches have caught up with the API server; returns the revision up to
        which the states are complete."""
        deadline = time.monotonic() + timeout_s
        while True:
            barrier = self._complete_up_to()
            if barrier is not None:
                self.judged_up_to = max(self.judged_up_to, barrier)
                return barrier
            assert time.monotonic() < deadline, "the sampler's watches did not catch up"
            time.sleep(0.2)

    # --- reading what it saw (cheaper than asking the API server while many tests poll) --------

    def current(self, kind: str) -> dict[str, Mapping[str, Any]]:
        """The latest version of each object of ``kind`` that still exists, by name."""
        feed = next(f for f in self.feeds if f.kind == kind)
        with self._lock:
            return dict(feed.objects)

    def ever(self, kind: str, predicate: Callable[[Mapping[str, Any]], bool]) -> bool:
        """Did any version of ``kind`` satisfy ``predicate``?"""
        feed = next(f for f in self.feeds if f.kind == kind)
        with self._lock:
            versions = list(feed.versions)
        return any(not v.deleted and predicate(v.obj) for v in versions)

    def first(self, kind: str, predicate: Callable[[Mapping[str, Any]], bool]) -> Mapping[str, Any] | None:
        """The earliest version of ``kind`` (in the API server's order) that satisfies
        ``predicate``: a state that lasted less than a poll's interval is found too."""
        feed = next(f for f in self.feeds if f.kind == kind)
        with self._lock:
            versions = sorted(feed.versions, key=lambda v: v.revision)
        return next((v.obj for v in versions if not v.deleted and predicate(v.obj)), None)

    def generation_growth(self, kinds: tuple[str, ...] = ("RayService", "RayCluster")) -> dict[str, int]:
        """``kind/name`` -> how far its ``metadata.generation`` grew while watched (every spec
        write bumps it: a controller writing a field back and forth shows here)."""
        seen: dict[str, tuple[int, int]] = {}
        with self._lock:
            versions = [v for f in self.feeds if f.kind in kinds for v in f.versions]
        for version in versions:
            meta = version.obj["metadata"]
            key = f"{version.kind}/{meta['name']}/{meta.get('uid')}"
            generation = int(meta.get("generation") or 0)
            low, high = seen.get(key, (generation, generation))
            seen[key] = (min(low, generation), max(high, generation))
        return {key.rsplit("/", 1)[0]: high - low for key, (low, high) in seen.items()}

    def assert_no_write_fight(self, user_changes: Mapping[str, int] | None = None, handful: int = 4) -> None:
        """No object's generation grew by more than ``handful`` writes beyond the spec changes
        the test made itself (``user_changes``: ``kind/name`` -> how many)."""
        self.sync()
        changes = user_changes or {}
        grown = {
            key: growth
            for key, growth in self.generation_growth().items()
            if growth > handful + changes.get(key, 0)
        }
        assert not grown, f"generations grew without a user's change (a write fight?): {grown}"

    # --- judging -----------------------------------------------------------------------------

    def versions(self) -> list[Version]:
        """Every version up to what :meth:`sync` found complete, in the API server's order."""
        with self._lock:
            return sorted(
                (v for f in self.feeds for v in f.versions if v.revision <= self.judged_up_to),
                key=lambda v: v.revision,
            )

    def forgive(self, covers: Callable[[Version], bool]) -> None:
        """Leave the versions ``covers`` picks out of the judging (a path that breaks the
        invariants by design, as `tests/gate_early_start.py` finds; the test checks it apart)."""
        self._forgiven.append(covers)

    def states(self) -> Iterator[tuple[Version, State]]:
        """Each version in the API server's order (less the forgiven), with the state right after it."""
        versions = [v for v in self.versions() if not any(covers(v) for covers in self._forgiven)]
        return self.judge.replay(versions)

    def violations(self, limit: int = 20) -> list[str]:
        found: list[str] = []
        for version, state in self.states():
            for problem in self.judge.judge(version, state):
                if problem not in found:
                    found.append(problem)
            if len(found) >= limit:
                break
        gaps = sum(f.gaps for f in self.feeds)
        if gaps:
            found.append(f"{gaps} watch(es) expired and were re-listed: states in between were not seen")
        return found

    def assert_holds(self) -> None:
        self.sync()
        problems = self.violations()
        assert not problems, "gate invariants broken:\n" + "\n".join(problems)

    def close(self) -> None:
        """Stop watching (idempotent)."""
        if not self._stop.is_set():
            self._stop.set()
            for thread in self._threads:
                thread.join(timeout=15)
            self.api.close()

    def __enter__(self) -> GateSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
