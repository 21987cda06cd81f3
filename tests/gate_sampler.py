"""The gate's invariants, checked at every state the API server went through, not only at the end.

A :class:`GateSampler` watches, in one namespace, the pods, the Workloads, the RayClusters and
the submitter Jobs, and the ClusterQueue they are admitted to. Every version of every object
is kept with its ``resourceVersion``; the local control plane's resourceVersions are etcd
revisions, one counter for all kinds, so sorting the versions by it replays the states in the
order the API server stored them (two watches may deliver them in another order, and a
sampler that judged on arrival would see quota released "before" the pods went). At each state:

- every pod carries the admitted flavor's nodeSelector and tolerations, and a bound pod sits
  on a node with the flavor's labels;
- the requests of the pods that hold resources (not Succeeded or Failed; terminating ones
  included) never exceed, for every covered resource, what the namespace's Workloads are
  admitted (``status.admission``), nor the ClusterQueue's nominal quota. So no pod runs before
  its admission and no admission shrinks before the pods that used it are gone;
- no child RayCluster of a RayJob, no submitter Job, and no unsuspended child RayCluster of a
  RayService exists while its owner's Workload records no admission.

The requests are computed here, independently of the operator's code. Quantities are parsed
with the Kubernetes client's ``parse_quantity``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.utils import parse_quantity

GROUP, VERSION = "rayquota.io", "v1alpha1"
COVERED = ("nvidia.com/gpu", "cpu", "memory")
FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class FlavorPlacement:
    node_labels: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Version:
    revision: int
    kind: str
    deleted: bool
    obj: Mapping[str, Any]

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, str(self.obj["metadata"]["name"])


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """Containers summed (request, else limit), init containers at their peak, plus overhead."""
    spec = pod.get("spec") or {}

    def of(container: Mapping[str, Any]) -> dict[str, Decimal]:
        res = container.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return {k: Decimal(parse_quantity(v)) for k, v in merged.items()}

    total: dict[str, Decimal] = {}
    for c in spec.get("containers") or []:
        for k, v in of(c).items():
            total[k] = total.get(k, Decimal(0)) + v
    for c in spec.get("initContainers") or []:
        for k, v in of(c).items():
            total[k] = max(total.get(k, Decimal(0)), v)
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, Decimal(0)) + Decimal(parse_quantity(v))
    return total


def _controller_uid(obj: Mapping[str, Any]) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref["uid"])
    return None


def is_true(obj: Mapping[str, Any], condition: str) -> bool:
    return any(
        c.get("type") == condition and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def holds(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in FINISHED


def admitted_usage(workload: Mapping[str, Any]) -> dict[str, Decimal]:
    admission = (workload.get("status") or {}).get("admission") or {}
    total: dict[str, Decimal] = {}
    for ps in admission.get("podSetAssignments") or []:
        for k, v in (ps.get("resourceUsage") or {}).items():
            total[k] = total.get(k, Decimal(0)) + Decimal(parse_quantity(v))
    return total


def nominal_quota(cluster_queue: Mapping[str, Any]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for r in flavor.get("resources") or []:
                total[r["name"]] = total.get(r["name"], Decimal(0)) + Decimal(
                    parse_quantity(r["nominalQuota"])
                )
    return total


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
    ) -> None:
        self.namespace, self.cluster_queue = namespace, cluster_queue
        self.placement, self.covered = placement, covered
        self.api = config.new_client_from_config(config_file=kubeconfig)
        core, custom, batch = (
            client.CoreV1Api(self.api),
            client.CustomObjectsApi(self.api),
            client.BatchV1Api(self.api),
        )
        ns = namespace
        self.feeds = [
            _Feed("Pod", core.list_namespaced_pod, (ns,)),
            _Feed("Workload", custom.list_namespaced_custom_object, (GROUP, VERSION, ns, "workloads")),
            _Feed("RayCluster", custom.list_namespaced_custom_object, ("ray.io", "v1", ns, "rayclusters")),
            _Feed("Job", batch.list_namespaced_job, (ns,)),
            _Feed("ClusterQueue", custom.list_cluster_custom_object, (GROUP, VERSION, "clusterqueues")),
            # Not judged: watched so that tests can wait on them without asking the API server.
            _Feed("RayJob", custom.list_namespaced_custom_object, ("ray.io", "v1", ns, "rayjobs")),
            _Feed("RayService", custom.list_namespaced_custom_object, ("ray.io", "v1", ns, "rayservices")),
        ]
        self.nodes = {n.metadata.name: dict(n.metadata.labels or {}) for n in core.list_node().items}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.judged_up_to = 0  # states after this revision may still miss a watch's events
        self._owner_of: dict[str, str] = {}  # uid of a RayCluster or Job -> its controller's uid

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

    # --- judging -----------------------------------------------------------------------------

    def states(self) -> Iterator[tuple[Version, dict[tuple[str, str], Mapping[str, Any]]]]:
        """Each version in the API server's order, with the state right after it."""
        with self._lock:
            versions = sorted(
                (v for f in self.feeds for v in f.versions if v.revision <= self.judged_up_to),
                key=lambda v: v.revision,
            )
        state: dict[tuple[str, str], Mapping[str, Any]] = {}
        for version in versions:
            if version.deleted:
                state.pop(version.key, None)
                if version.kind == "Workload" and admitted_usage(version.obj):
                    # Its object was deleted: the quota stays held until the pods are gone.
                    state[("DepartedWorkload", version.key[1])] = version.obj
            else:
                state[version.key] = version.obj
            if version.kind in ("RayCluster", "Job") and not version.deleted:
                owner = _controller_uid(version.obj)
                if owner:
                    self._owner_of[str(version.obj["metadata"]["uid"])] = owner
            yield version, state

    def violations(self, limit: int = 20) -> list[str]:
        found: list[str] = []
        for version, state in self.states():
            for problem in self._judge(version, state):
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

    def _judge(self, version: Version, state: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[str]:
        at = f"at revision {version.revision} ({version.kind} {version.key[1]})"
        problems: list[str] = []
        if version.kind == "Pod" and not version.deleted and holds(version.obj):
            problems += [f"{at}: {p}" for p in self._misplaced(version.obj)]
        if version.kind in ("Pod", "Workload", "ClusterQueue"):
            problems += [f"{at}: {p}" for p in self._over_quota(state)]
        if version.kind in ("RayCluster", "Job", "Workload"):
            problems += [f"{at}: {p}" for p in self._unadmitted_children(state)]
        return problems

    def _misplaced(self, pod: Mapping[str, Any]) -> list[str]:
        if self.placement is None:
            return []
        name = pod["metadata"]["name"]
        spec = pod.get("spec") or {}
        problems = []
        selector = spec.get("nodeSelector") or {}
        lacking = {k: v for k, v in self.placement.node_labels.items() if selector.get(k) != v}
        if lacking:
            problems.append(f"pod {name} lacks the flavor's nodeSelector {lacking}")
        tolerations = spec.get("tolerations") or []
        for t in self.placement.tolerations:
            if not any(all(have.get(k) == v for k, v in t.items()) for have in tolerations):
                problems.append(f"pod {name} lacks the flavor's toleration {dict(t)}")
        node = spec.get("nodeName")
        if node:
            labels = self.nodes.get(node, {})
            wrong = {k: v for k, v in self.placement.node_labels.items() if labels.get(k) != v}
            if wrong:
                problems.append(f"pod {name} runs on node {node}, not on the flavor's nodes ({wrong})")
        return problems

    def _over_quota(self, state: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[str]:
        used: dict[str, Decimal] = {}
        holders: list[str] = []
        for (kind, name), obj in state.items():
            if kind == "Pod" and holds(obj):
                holders.append(name + ("(terminating)" if obj["metadata"].get("deletionTimestamp") else ""))
                for k, v in pod_requests(obj).items():
                    used[k] = used.get(k, Decimal(0)) + v
        admitted: dict[str, Decimal] = {}
        holding_owners = {
            owner
            for (kind, _), obj in state.items()
            if kind == "Pod" and holds(obj)
            for owner in self._owners_of(obj)
        }
        for (kind, _), obj in state.items():
            if kind not in ("Workload", "DepartedWorkload"):
                continue
            # A finished or deleted object's admission is held only until its pods are gone (a
            # Workload whose object is gone may outlive it a moment: the garbage collector's).
            owner = next(iter(obj["metadata"].get("ownerReferences") or []), None)
            owner_obj = state.get((str(owner["kind"]), str(owner["name"]))) if owner else None
            owner_gone = owner is not None and (
                owner_obj is None or owner_obj["metadata"].get("deletionTimestamp")
            )
            done = kind == "DepartedWorkload" or is_true(obj, "Finished") or bool(owner_gone)
            has_pods = bool({r["uid"] for r in obj["metadata"].get("ownerReferences") or []} & holding_owners)
            if not done or has_pods:
                for k, v in admitted_usage(obj).items():
                    admitted[k] = admitted.get(k, Decimal(0)) + v
        queue = state.get(("ClusterQueue", self.cluster_queue))
        nominal = nominal_quota(queue) if queue is not None else {}
        problems = []
        for resource in self.covered:
            if queue is not None and admitted.get(resource, Decimal(0)) > nominal.get(resource, Decimal(0)):
                problems.append(
                    f"admitted {resource} {admitted[resource]} > nominal quota {nominal.get(resource, 0)} "
                    "(quota given again before the pods that held it were gone?)"
                )
        for resource in self.covered:
            held = used.get(resource, Decimal(0))
            if not held:
                continue
            if held > admitted.get(resource, Decimal(0)):
                problems.append(
                    f"live pods hold {resource} {held} > admitted {admitted.get(resource, 0)} "
                    f"(pods: {sorted(holders)}; admissions: {self._admissions(state)}; "
                    f"clusters: {self._clusters(state)})"
                )
            if queue is not None and held > nominal.get(resource, Decimal(0)):
                problems.append(
                    f"live pods hold {resource} {held} > nominal quota {nominal.get(resource, 0)}"
                )
        return problems

    @staticmethod
    def _admissions(state: Mapping[tuple[str, str], Mapping[str, Any]]) -> dict[str, dict[str, int]]:
        """Workload -> pod set -> admitted count, for a violation's message."""
        return {
            name: {
                str(ps["name"]): int(ps.get("count") or 0)
                for ps in ((obj.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
            }
            for (kind, name), obj in state.items()
            if kind in ("Workload", "DepartedWorkload")
        }

    @staticmethod
    def _clusters(state: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[str]:
        """The RayClusters, gated or deleting, for a violation's message."""
        out = []
        for (kind, name), obj in state.items():
            if kind == "RayCluster":
                flags = [
                    flag
                    for flag, on in (
                        ("suspended", (obj.get("spec") or {}).get("suspend")),
                        ("deleting", obj["metadata"].get("deletionTimestamp")),
                    )
                    if on
                ]
                out.append(f"{name}{flags or ''}")
        return out

    def _owners_of(self, pod: Mapping[str, Any]) -> set[str]:
        """The pod's owner, and that owner's owner (a RayCluster's RayJob or RayService)."""
        owners: set[str] = set()
        uid = _controller_uid(pod)
        while uid and uid not in owners:
            owners.add(uid)
            uid = self._owner_of.get(uid)
        return owners

    def _unadmitted_children(self, state: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[str]:
        admitted_owners = set()
        for (kind, _), obj in state.items():
            if kind == "Workload" and (obj.get("status") or {}).get("admission"):
                admitted_owners |= {r["uid"] for r in obj["metadata"].get("ownerReferences") or []}
        problems = []
        for (kind, name), obj in state.items():
            if kind not in ("RayCluster", "Job") or obj["metadata"].get("deletionTimestamp"):
                continue
            owners = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")]
            owner = owners[0] if owners else None
            if owner is None or owner["uid"] in admitted_owners:
                continue
            parent = state.get((str(owner["kind"]), str(owner["name"])))
            if parent is None or parent["metadata"].get("deletionTimestamp"):
                continue  # its owner was deleted: the garbage collector removes it
            if kind == "Job" and owner["kind"] == "RayJob":
                problems.append(f"submitter Job {name} exists while RayJob {owner['name']} is not admitted")
            elif kind == "RayCluster" and owner["kind"] == "RayJob":
                problems.append(f"RayCluster {name} exists while RayJob {owner['name']} is not admitted")
            elif (
                kind == "RayCluster"
                and owner["kind"] == "RayService"
                and not (obj.get("spec") or {}).get("suspend")
            ):
                problems.append(
                    f"RayCluster {name} runs ungated while RayService {owner['name']} is not admitted"
                )
        return problems

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
