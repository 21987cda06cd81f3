"""The gate's invariants, judged at one state of a namespace (pure: no I/O).

A state is every watched object as the API server held it right after one write (see
tests/gate_sampler.py, which replays the writes in order). At each state:

- every pod carries the admitted flavor's nodeSelector and tolerations, and a bound pod sits
  on a node with the flavor's labels (a pod held at a scheduling gate, never bound, holds
  nothing and is judged once it is let through);
- the requests of the pods that hold resources (not Succeeded or Failed; terminating ones
  included), with the devices allocated to their ResourceClaims (DRA) counted as the quota
  resource their DeviceClass is mapped to (``device_classes``), never exceed, for every covered
  resource, what the namespace's Workloads are admitted (``status.admission``), nor the
  ClusterQueue's nominal quota; and the admissions never add up to more than that quota. So
  no pod runs before its admission, no admission
  shrinks before the pods that used it are gone, and no quota is given twice. (A finished or
  deleted object's admission counts only while its pods still hold resources.);
- no child RayCluster of a RayJob, no submitter Job, and no unsuspended child RayCluster of a
  RayService exists while its owner's Workload records no admission; and no queued Job (one
  with a queue label and no controller) is unsuspended while its own Workload records none;
- no Job of a JobSet is unsuspended (unless finished), and no pod of a JobSet exists (gated,
  terminating or not, unless finished), while the JobSet's Workload records no admission (when
  the JobSets are watched: a JobSet the state does not show, or that is being deleted, is the
  garbage collector's).

A JobSet written unsuspended without the webhook starts its Jobs and their pods before the
queue can gate it (docs/operations.md): `tests/gate_early_start.py` finds them, for a test of
that path to leave out of the judging (and to check that they went).

The requests are computed here, independently of the operator's code. Quantities are parsed
with the Kubernetes client's ``parse_quantity``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

COVERED = ("nvidia.com/gpu", "cpu", "memory")
# What JobSet's controller labels its Jobs' pods with: the JobSet's name.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
# The labels that queue an object (rayquota's own and Kueue's).
QUEUE_LABELS = ("rayquota.io/queue-name", "kueue.x-k8s.io/queue-name")
FINISHED = ("Succeeded", "Failed")
State = dict[tuple[str, str], Mapping[str, Any]]


@dataclass(frozen=True)
class FlavorPlacement:
    node_labels: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Version:
    """One write the API server stored: its revision, and the object after it."""

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


def claim_devices(claim: Mapping[str, Any], device_classes: Mapping[str, str]) -> dict[str, Decimal]:
    """The devices allocated to a ResourceClaim (``status.allocation.devices.results``), per quota
    resource: each result's request (``name``, or ``name/subrequest`` for ``firstAvailable``) is
    looked up in the claim's spec for its DeviceClass, mapped through ``device_classes``
    (DeviceClass -> quota resource); a class no mapping covers counts as ``deviceclass/<name>``."""
    spec_requests = {
        str(r.get("name")): r for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    }
    allocation = (claim.get("status") or {}).get("allocation") or {}
    total: dict[str, Decimal] = {}
    for result in (allocation.get("devices") or {}).get("results") or []:
        name, _, sub = str(result.get("request") or "").partition("/")
        request = spec_requests.get(name) or {}
        if sub:
            chosen = [s for s in request.get("firstAvailable") or [] if s.get("name") == sub]
            device_class = str(chosen[0].get("deviceClassName") if chosen else "")
        else:
            device_class = str((request.get("exactly") or {}).get("deviceClassName") or "")
        resource = device_classes.get(device_class, f"deviceclass/{device_class}")
        total[resource] = total.get(resource, Decimal(0)) + 1
    return total


def claim_holders(claim: Mapping[str, Any]) -> set[str]:
    """The uids of the pods a claim is reserved for, or made for (its owner pod)."""
    uids = {
        str(r["uid"])
        for r in (claim.get("status") or {}).get("reservedFor") or []
        if r.get("resource") == "pods"
    }
    uids |= {str(r["uid"]) for r in claim["metadata"].get("ownerReferences") or [] if r.get("kind") == "Pod"}
    return uids


def controller_uid(obj: Mapping[str, Any]) -> str | None:
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
    """Does the pod hold (or may it take) its node's resources? Not once finished; not while a
    scheduling gate keeps it from being scheduled (it is bound to no node and the scheduler does
    not look at it), so such a pod is neither counted against the admission nor judged for its
    placement; the moment its gates are gone it counts, and must carry its flavor."""
    if (pod.get("status") or {}).get("phase") in FINISHED:
        return False
    spec = pod.get("spec") or {}
    return bool(spec.get("nodeName")) or not spec.get("schedulingGates")


def job_finished(job: Mapping[str, Any]) -> bool:
    return is_true(job, "Complete") or is_true(job, "Failed")


def _queued(obj: Mapping[str, Any]) -> bool:
    return any(key in (obj["metadata"].get("labels") or {}) for key in QUEUE_LABELS)


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
class Judge:
    """Judges the states of one namespace whose pods must run on ``placement``'s nodes under
    ClusterQueue ``cluster_queue``."""

    cluster_queue: str
    placement: FlavorPlacement | None
    nodes: Mapping[str, Mapping[str, str]]  # node name -> labels
    covered: tuple[str, ...] = COVERED
    device_classes: Mapping[str, str] = field(default_factory=dict)  # DeviceClass -> quota resource
    _owner_of: dict[str, str] = field(default_factory=dict)  # uid of a RayCluster or Job -> its controller's

    def replay(self, versions: Iterable[Version]) -> Iterator[tuple[Version, State]]:
        """Each version (in revision order), with the state right after it."""
        state: State = {}
        for version in versions:
            if version.deleted:
                state.pop(version.key, None)
                if version.kind == "Workload" and admitted_usage(version.obj):
                    # Its object was deleted: the quota stays held until the pods are gone.
                    state[("DepartedWorkload", version.key[1])] = version.obj
            else:
                state[version.key] = version.obj
            if version.kind in ("RayCluster", "Job") and not version.deleted:
                owner = controller_uid(version.obj)
                if owner:
                    self._owner_of[str(version.obj["metadata"]["uid"])] = owner
            yield version, state

    def judge(self, version: Version, state: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[str]:
        at = f"at revision {version.revision} ({version.kind} {version.key[1]})"
        problems: list[str] = []
        if version.kind == "Pod" and not version.deleted and holds(version.obj):
            problems += [f"{at}: {p}" for p in self._misplaced(version.obj)]
        if version.kind in ("Pod", "Workload", "ClusterQueue", "ResourceClaim"):
            problems += [f"{at}: {p}" for p in self._over_quota(state)]
        if version.kind in ("RayCluster", "Job", "Workload", "JobSet"):
            problems += [f"{at}: {p}" for p in self._unadmitted_children(state)]
        if version.kind in ("Pod", "Workload", "JobSet"):
            problems += [f"{at}: {p}" for p in self._unadmitted_jobset_pods(state)]
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
        for k, v in self._claimed_devices(state).items():
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

    def _claimed_devices(self, state: Mapping[tuple[str, str], Mapping[str, Any]]) -> dict[str, Decimal]:
        """The devices allocated to the ResourceClaims of pods that hold resources (a claim shared
        by several pods counts once)."""
        total: dict[str, Decimal] = {}
        if not any(kind == "ResourceClaim" for kind, _ in state):
            return total
        live = {
            str(obj["metadata"].get("uid"))
            for (kind, _), obj in state.items()
            if kind == "Pod" and holds(obj) and obj["metadata"].get("uid")
        }
        for (kind, _), obj in state.items():
            if kind == "ResourceClaim" and claim_holders(obj) & live:
                for k, v in claim_devices(obj, self.device_classes).items():
                    total[k] = total.get(k, Decimal(0)) + v
        return total

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
        uid = controller_uid(pod)
        while uid and uid not in owners:
            owners.add(uid)
            uid = self._owner_of.get(uid)
        return owners

    @staticmethod
    def _admitted_owners(state: Mapping[tuple[str, str], Mapping[str, Any]]) -> set[str]:
        """The uids of the objects whose Workload records an admission (or finished)."""
        admitted_owners = set()
        for (kind, _), obj in state.items():
            # A finished Workload's quota is given back and its admission cleared, while its
            # completed Job stays unsuspended (its controller starts nothing more).
            recorded = (obj.get("status") or {}).get("admission") or is_true(obj, "Finished")
            if kind == "Workload" and recorded:
                admitted_owners |= {r["uid"] for r in obj["metadata"].get("ownerReferences") or []}
        return admitted_owners

    def _unadmitted_jobset_pods(self, state: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[str]:
        admitted_owners = self._admitted_owners(state)
        problems = []
        for (kind, name), obj in state.items():
            jobset_name = (obj["metadata"].get("labels") or {}).get(JOBSET_NAME_LABEL)
            if kind != "Pod" or not jobset_name or (obj.get("status") or {}).get("phase") in FINISHED:
                continue
            jobset = state.get(("JobSet", str(jobset_name)))
            if jobset is None or jobset["metadata"].get("deletionTimestamp"):
                continue  # not watched, or deleted: the garbage collector's
            if jobset["metadata"]["uid"] not in admitted_owners:
                problems.append(
                    f"pod {name} of JobSet {jobset_name} exists while its Workload records no admission"
                )
        return problems

    def _unadmitted_children(self, state: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[str]:
        admitted_owners = self._admitted_owners(state)
        problems = []
        for (kind, name), obj in state.items():
            if kind not in ("RayCluster", "Job") or obj["metadata"].get("deletionTimestamp"):
                continue
            owners = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")]
            owner = owners[0] if owners else None
            if owner is None and kind == "Job" and _queued(obj):
                if (
                    not (obj.get("spec") or {}).get("suspend")
                    and obj["metadata"]["uid"] not in admitted_owners
                ):
                    problems.append(
                        f"queued Job {name} is unsuspended while its Workload records no admission"
                    )
                continue
            if owner is None or owner["uid"] in admitted_owners:
                continue
            parent = state.get((str(owner["kind"]), str(owner["name"])))
            if parent is None or parent["metadata"].get("deletionTimestamp"):
                continue  # its owner was deleted: the garbage collector removes it
            if kind == "Job" and owner["kind"] == "JobSet":
                if not (obj.get("spec") or {}).get("suspend") and not job_finished(obj):
                    problems.append(
                        f"Job {name} of JobSet {owner['name']} is unsuspended while its Workload "
                        "records no admission"
                    )
            elif kind == "Job" and owner["kind"] == "RayJob":
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
