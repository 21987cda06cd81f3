"""Hypothesis strategies for the documents users send the operator's API: RayCluster, RayJob,
RayService, ClusterQueue, LocalQueue, ResourceFlavor and Workload.

`case(names)` draws one :class:`Case`: a valid document of one kind, or a valid one broken by
one :class:`Mutation` (a wrong type, a negative, huge or malformed quantity, a field removed, a
field nobody declared, a name or label past its limits or in unicode, 100 worker groups). The
mutation says where it struck, so a test can check that a refusal names that field and value.
Names come from `Names` so that the documents of one run never touch anyone else's objects.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

Path = tuple[str | int, ...]
DELETED = object()  # the mutation removes the field

NAME = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
QUANTITY = st.one_of(
    st.integers(0, 64), st.sampled_from(["500m", "1", "2", "1Gi", "0.5", "1e3", "64Ki", "2G"])
)
BAD_QUANTITY = st.one_of(
    st.sampled_from(
        ["-1", "-500m", "abc", "1.2.3", "", " ", "1e1000", "99999999999999999999Ei", "0x10", "½"]
    ),
    st.sampled_from([-1, -(2**31), 2**63, 10**30]),
    st.sampled_from([True, 1.5, [], {}, None]),
)
WRONG_TYPES = st.sampled_from(["a-string", 7, -3, 2**40, 1.25, True, None, [], ["x"], {}, {"k": "v"}])
UNICODE = st.text(alphabet=st.characters(min_codepoint=0xA1, max_codepoint=0x2FFF), min_size=1, max_size=12)


@dataclass(frozen=True)
class Names:
    """The namespace the documents go to and the prefix of cluster-scoped names; `queue` and
    `cluster_queue` exist (a valid queued document waits there, admitted by nothing)."""

    namespace: str
    prefix: str
    queue: str
    cluster_queue: str
    flavor: str


@dataclass(frozen=True)
class Mutation:
    what: str  # e.g. "wrong type", "bad quantity", "deleted", "unknown field"
    path: Path
    value: Any = DELETED

    def render_path(self) -> str:
        """The path as Kubernetes writes it: spec.workerGroupSpecs[0].replicas."""
        out = ""
        for step in self.path:
            out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
        return out

    def describe(self) -> str:
        value = "(removed)" if self.value is DELETED else json.dumps(self.value, default=str)[:80]
        return f"{self.what} at {self.render_path()}: {value}"


@dataclass(frozen=True)
class Case:
    kind: str
    plural: str
    group: str
    namespaced: bool
    document: dict[str, Any]
    mutation: Mutation | None

    @property
    def name(self) -> Any:
        meta = self.document.get("metadata")
        return meta.get("name") if isinstance(meta, dict) else None

    def __repr__(self) -> str:
        broken = self.mutation.describe() if self.mutation else "valid"
        return f"Case({self.kind} {self.name!r}, {broken})"


# --- valid documents ----------------------------------------------------------------------------


@st.composite
def container(draw: st.DrawFn, name: str, gpus: bool) -> dict[str, Any]:
    requests: dict[str, Any] = {
        "cpu": draw(QUANTITY),
        "memory": draw(st.sampled_from(["1Gi", "512Mi", "2G"])),
    }
    if gpus:
        requests["nvidia.com/gpu"] = draw(st.integers(0, 4))
    resources: dict[str, Any] = {"requests": requests}
    if draw(st.booleans()):
        resources["limits"] = dict(requests)
    return {"name": name, "image": "rayproject/ray:2.41.0", "resources": resources}


@st.composite
def cluster_spec(draw: st.DrawFn) -> dict[str, Any]:
    groups = []
    for i in range(draw(st.integers(0, 3))):
        replicas = draw(st.integers(0, 3))
        groups.append(
            {
                "groupName": f"g{i}",
                "replicas": replicas,
                "minReplicas": 0,
                "maxReplicas": replicas + draw(st.integers(0, 3)),
                "numOfHosts": draw(st.integers(1, 2)),
                "rayStartParams": {},
                "template": {"spec": {"containers": [draw(container("ray-worker", gpus=True))]}},
            }
        )
    return {
        "rayVersion": "2.41.0",
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [draw(container("ray-head", gpus=False))]}},
        },
        "workerGroupSpecs": groups,
    }


def _meta(draw: st.DrawFn, names: Names, namespaced: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"{names.prefix}-{draw(NAME)}"}
    if namespaced:
        meta["namespace"] = names.namespace
    return meta


def _queued(draw: st.DrawFn, names: Names, meta: dict[str, Any]) -> dict[str, Any]:
    queue = draw(st.sampled_from([names.queue, names.queue, f"{names.prefix}-nowhere"]))
    meta["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return meta


@st.composite
def raycluster(draw: st.DrawFn, names: Names) -> dict[str, Any]:
    meta = _queued(draw, names, _meta(draw, names, True))
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": draw(cluster_spec())}


@st.composite
def rayjob(draw: st.DrawFn, names: Names) -> dict[str, Any]:
    meta = _queued(draw, names, _meta(draw, names, True))
    spec: dict[str, Any] = {
        "entrypoint": draw(st.sampled_from(["python -c 'print(1)'", "echo ok"])),
        "shutdownAfterJobFinishes": True,
        "submissionMode": draw(st.sampled_from(["HTTPMode", "K8sJobMode"])),
        "rayClusterSpec": draw(cluster_spec()),
    }
    if draw(st.booleans()):
        spec["activeDeadlineSeconds"] = draw(st.integers(1, 3600))
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta, "spec": spec}


@st.composite
def rayservice(draw: st.DrawFn, names: Names) -> dict[str, Any]:
    meta = _queued(draw, names, _meta(draw, names, True))
    spec = {
        "serveConfigV2": "applications:\n  - name: app\n    import_path: demo:app\n",
        "upgradeStrategy": {"type": draw(st.sampled_from(["NewCluster", "None"]))},
        "rayClusterConfig": draw(cluster_spec()),
    }
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": meta, "spec": spec}


@st.composite
def resource_flavor(draw: st.DrawFn, names: Names) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": {"rayquota.io/gpu-pool": draw(NAME)}}
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    meta = _meta(draw, names, False)
    return {"apiVersion": "rayquota.io/v1alpha1", "kind": "ResourceFlavor", "metadata": meta, "spec": spec}


@st.composite
def cluster_queue(draw: st.DrawFn, names: Names) -> dict[str, Any]:
    covered = draw(
        st.lists(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), min_size=1, max_size=3, unique=True)
    )
    flavors = []
    cohort = f"{names.prefix}-{draw(NAME)}" if draw(st.booleans()) else None
    for flavor in draw(st.lists(NAME, min_size=1, max_size=3, unique=True)):
        resources = []
        for resource in covered:
            entry: dict[str, Any] = {"name": resource, "nominalQuota": draw(QUANTITY)}
            if cohort is not None and draw(st.booleans()):  # a limit needs a cohort
                entry["borrowingLimit"] = draw(QUANTITY)
            resources.append(entry)
        flavors.append({"name": f"{names.prefix}-{flavor}", "resources": resources})
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
        "queueingStrategy": draw(st.sampled_from(["StrictFIFO", "BestEffortFIFO"])),
    }
    if cohort is not None:
        spec["cohort"] = cohort
    meta = _meta(draw, names, False)
    return {"apiVersion": "rayquota.io/v1alpha1", "kind": "ClusterQueue", "metadata": meta, "spec": spec}


@st.composite
def local_queue(draw: st.DrawFn, names: Names) -> dict[str, Any]:
    target = draw(st.sampled_from([names.cluster_queue, f"{names.prefix}-{draw(NAME)}"]))
    meta = _meta(draw, names, True)
    return {"apiVersion": "rayquota.io/v1alpha1", "kind": "LocalQueue", "metadata": meta,
            "spec": {"clusterQueue": target}}  # fmt: skip


@st.composite
def workload(draw: st.DrawFn, names: Names) -> dict[str, Any]:
    pod_sets = []
    for i in range(draw(st.integers(1, 3))):
        pod_set: dict[str, Any] = {"name": f"ps{i}", "count": draw(st.integers(0, 4))}
        if draw(st.booleans()):
            pod_set["requests"] = {"cpu": draw(QUANTITY), "nvidia.com/gpu": draw(st.integers(0, 2))}
        else:
            pod_set["template"] = {"spec": {"containers": [draw(container("main", gpus=True))]}}
        pod_sets.append(pod_set)
    spec = {"queueName": draw(st.sampled_from([names.queue, f"{names.prefix}-nowhere"])), "podSets": pod_sets}
    meta = _meta(draw, names, True)
    return {"apiVersion": "rayquota.io/v1alpha1", "kind": "Workload", "metadata": meta, "spec": spec}


KINDS = {  # kind: (strategy, plural, group, namespaced)
    "RayCluster": (raycluster, "rayclusters", "ray.io", True),
    "RayJob": (rayjob, "rayjobs", "ray.io", True),
    "RayService": (rayservice, "rayservices", "ray.io", True),
    "ResourceFlavor": (resource_flavor, "resourceflavors", "rayquota.io", False),
    "ClusterQueue": (cluster_queue, "clusterqueues", "rayquota.io", False),
    "LocalQueue": (local_queue, "localqueues", "rayquota.io", True),
    "Workload": (workload, "workloads", "rayquota.io", True),
}


# --- breaking them ------------------------------------------------------------------------------


def leaves(doc: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every field below the top (apiVersion and kind left alone), containers included."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if path == () and key in ("apiVersion", "kind"):
                continue
            yield (*path, key), value
            yield from leaves(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield (*path, i), value
            yield from leaves(value, (*path, i))


QUANTITY_PARENTS = {"requests", "limits", "nominalQuota", "borrowingLimit", "lendingLimit"}


def is_quantity(path: Path) -> bool:
    return bool(path) and (path[-1] in QUANTITY_PARENTS - {"requests", "limits"} or (
        len(path) > 1 and path[-2] in ("requests", "limits")))  # fmt: skip


def set_at(doc: dict[str, Any], path: Path, value: Any) -> None:
    parent: Any = doc
    for step in path[:-1]:
        parent = parent[step]
    if value is DELETED:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value


def worker_groups_path(doc: dict[str, Any]) -> Path | None:
    spec = doc.get("spec") or {}
    for key in ("rayClusterSpec", "rayClusterConfig"):
        if key in spec:
            return ("spec", key, "workerGroupSpecs")
    return ("spec", "workerGroupSpecs") if "headGroupSpec" in spec else None


@st.composite
def mutation(draw: st.DrawFn, doc: dict[str, Any]) -> Mutation:
    fields = list(leaves(doc))
    quantities = [p for p, v in fields if is_quantity(p) and not isinstance(v, dict | list)]
    groups = worker_groups_path(doc)
    options = ["wrong type", "deleted", "unknown field", "long name", "unicode name", "bad label"]
    options += ["bad quantity"] * 3 if quantities else []
    options += ["100 worker groups"] if groups else []
    what = draw(st.sampled_from(options))
    if what == "bad quantity":
        return Mutation(what, draw(st.sampled_from(quantities)), draw(BAD_QUANTITY))
    # A whole top-level section (metadata, spec) is struck rarely: most cases go deeper.
    inner = [(p, v) for p, v in fields if len(p) > 1] or fields
    targets = (
        st.one_of(st.sampled_from(inner), st.sampled_from(fields))
        if draw(st.integers(0, 9))
        else st.sampled_from(fields)
    )
    if what == "wrong type":
        path, old = draw(targets)
        value = draw(WRONG_TYPES.filter(lambda v: type(v) is not type(old)))
        return Mutation(what, path, value)
    if what == "deleted":
        return Mutation(what, draw(targets)[0])
    if what == "unknown field":
        parents = [(p, v) for p, v in fields if isinstance(v, dict)]
        path = draw(st.sampled_from(parents))[0] if parents and draw(st.booleans()) else ()
        return Mutation(what, (*path, f"unknownField{draw(st.integers(0, 99))}"), draw(WRONG_TYPES))
    if what == "long name":
        return Mutation(
            what, ("metadata", "name"), "n" + "x" * draw(st.sampled_from([63, 64, 200, 253, 400]))
        )
    if what == "unicode name":
        return Mutation(what, ("metadata", "name"), draw(UNICODE))
    if what == "bad label":
        key = draw(st.sampled_from(["app", "x" * 64, "ünï", "a/b/c", "rayquota.io/queue-name"]))
        value = draw(st.one_of(st.sampled_from(["ok", "v" * 64, "-bad-", "a b"]), UNICODE))
        return Mutation(what, ("metadata", "labels", key), value)
    assert groups is not None
    template = copy.deepcopy(_at(doc, groups) or [])
    container = {"name": "w", "image": "rayproject/ray:2.41.0"}
    base = template[0] if template else {
        "replicas": 1, "minReplicas": 0, "maxReplicas": 1, "rayStartParams": {},
        "template": {"spec": {"containers": [container]}},
    }  # fmt: skip
    return Mutation(what, groups, [{**copy.deepcopy(base), "groupName": f"group-{i}"} for i in range(100)])


def _at(doc: Any, path: Path) -> Any:
    for step in path:
        doc = doc[step]
    return doc


@st.composite
def case(draw: st.DrawFn, names: Names, broken: float = 0.7) -> Case:
    """One document: valid, or (with probability about `broken`) broken by one mutation."""
    kind = draw(st.sampled_from(sorted(KINDS)))
    strategy, plural, group, namespaced = KINDS[kind]
    document = draw(strategy(names))
    change = None
    if draw(st.floats(0, 1)) < broken:
        change = draw(mutation(document))
        if change.path == ("metadata", "labels", change.path[-1]) and "labels" not in document["metadata"]:
            document["metadata"]["labels"] = {}
        set_at(document, change.path, change.value)
    return Case(kind, plural, group, namespaced, document, change)
