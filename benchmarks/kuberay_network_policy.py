"""`spec.networkPolicy` beside KubeRay's real operator: the NetworkPolicies each side makes, diffed.

    nice -n 5 .venv/bin/python benchmarks/kuberay_network_policy.py \\
        --kuberay-binary ~/.cache/rayquota/bin/kuberay-operator-v1.7.0/kuberay-operator \\
        --kuberay-crds ~/.cache/rayquota/bin/kuberay-operator-v1.7.0/crd [--keep]

`networkPolicy` is new in KubeRay v1.7.0 (alpha, behind its `RayClusterNetworkPolicy` gate), so the
pinned v1.6.2 cannot be the peer: build v1.7.0 with `rayquota peers build kuberay --source DIR --tag
v1.7.0` and point the script at it. Two local control planes (`<prefix>-kuberay`,
`<prefix>-rayquota`): KubeRay's CRDs and operator with `--feature-gates=RayClusterNetworkPolicy=true`
in the first, our CRDs and `rayquota run` with `RAYQUOTA_FEATURE_GATES=RayClusterNetworkPolicy=true`
in the second. The same RayClusters and RayJobs (every mode of the field, its default, rules for the
head, `worker` and `workerGroups`, a K8sJobMode RayJob's submitter rule on a custom dashboard port)
are applied to both; when both have settled, the NetworkPolicies (and each RayCluster's stored
`spec.networkPolicy`) are normalised with benchmarks/parity_diff.py and compared field by field.
Then a second round of edits (a worker group removed, a mode narrowed, `networkPolicy` removed) and
the comparison again. A difference not matched by KNOWN_DIFFERENCES makes the script exit 1.

Not part of `make test`; the result of a run is recorded in docs/kuberay-compatibility.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness
from benchmarks.harness import PeerProcess
from benchmarks.kuberay_side_by_side import git_commit, log
from benchmarks.parity_diff import (
    Difference,
    KnownDifference,
    compare,
    explain,
    normalize,
    random_names,
)
from rayquota.localcluster import binaries, peers
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.install import install_crds
from rayquota.ports import free_port

NAMESPACE = "netpol"
GATES = "RayClusterNetworkPolicy=true"
IMAGE = "rayproject/ray:2.46.0"
SETTLE_TIMEOUT_S = 180.0
SETTLE_QUIET_S = 10.0

DNS_EGRESS = {
    "to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
}
FROM_MONITORING = {"from": [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}]}
# No protocol (the API server writes TCP), a named port, a port range, an ipBlock with exceptions.
TO_STORAGE = {
    "to": [{"ipBlock": {"cidr": "10.20.0.0/16", "except": ["10.20.5.0/24"]}}],
    "ports": [{"port": 9000, "endPort": 9010}, {"port": "s3"}],
}
FROM_PROMETHEUS = {
    "from": [{"podSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["prom"]}]}}],
    "ports": [{"port": "metrics"}],
}

# Why each remaining difference is deliberate. Matched (regex) against "Kind/name.path".
KNOWN_DIFFERENCES: tuple[KnownDifference, ...] = ()


def _group(name: str) -> dict[str, Any]:
    return {
        "groupName": name, "replicas": 1, "minReplicas": 0, "maxReplicas": 2, "rayStartParams": {},
        "template": {"spec": {"containers": [_container("ray-worker")]}},
    }  # fmt: skip


def _container(name: str) -> dict[str, Any]:
    return {"name": name, "image": IMAGE, "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}


def cluster_spec(groups: list[str], network_policy: dict[str, Any], **head_params: str) -> dict[str, Any]:
    head = {"rayStartParams": head_params, "template": {"spec": {"containers": [_container("ray-head")]}}}
    return {
        "rayVersion": "2.46.0",
        "headGroupSpec": head,
        "workerGroupSpecs": [_group(g) for g in groups],
        "networkPolicy": network_policy,
    }


def _obj(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": name, "namespace": NAMESPACE}
    return {"apiVersion": "ray.io/v1", "kind": kind, "metadata": meta, "spec": spec}


def manifests() -> list[dict[str, Any]]:
    deny_all = {
        "mode": "DenyAll",
        "head": {"ingressRules": [FROM_MONITORING, {"ports": [{"port": 8265}]}], "egressRules": [DNS_EGRESS]},
        "worker": {"ingressRules": [FROM_PROMETHEUS], "egressRules": [DNS_EGRESS, TO_STORAGE]},
        "workerGroups": [
            {"groupName": "gpu", "egressRules": []},  # replaces `worker` for gpu: no rules of its own
            {"groupName": "not-a-group", "egressRules": [{}]},  # names no group: no policy
        ],
    }
    ingress_only = {
        "mode": "DenyAllIngress",
        "head": {"ingressRules": [FROM_MONITORING], "egressRules": [DNS_EGRESS]},  # egress not closed
        "worker": {"ingressRules": [FROM_PROMETHEUS]},
    }
    egress_only = {
        "mode": "DenyAllEgress",
        "head": {"ingressRules": [FROM_MONITORING], "egressRules": [DNS_EGRESS]},  # ingress not closed
        "workerGroups": [{"groupName": "cpu", "egressRules": [DNS_EGRESS, TO_STORAGE]}],
    }
    job = {"entrypoint": "python -c 'print(1)'", "shutdownAfterJobFinishes": False}
    custom_port = {"dashboard-port": "8266"}
    return [
        _obj("RayCluster", "np-default", cluster_spec(["cpu", "gpu"], {})),  # mode defaults to DenyAll
        _obj("RayCluster", "np-deny-all", cluster_spec(["cpu", "gpu"], deny_all, **custom_port)),
        _obj("RayCluster", "np-ingress", cluster_spec(["cpu"], ingress_only)),
        _obj("RayCluster", "np-egress", cluster_spec(["cpu", "gpu"], egress_only)),
        _obj("RayJob", "npjob-k8s", {
            **job, "submissionMode": "K8sJobMode",
            "rayClusterSpec": cluster_spec(["cpu"], {"head": {"egressRules": [DNS_EGRESS]}},
                                           **custom_port),
        }),
        _obj("RayJob", "npjob-sidecar", {
            **job, "submissionMode": "SidecarMode", "rayClusterSpec": cluster_spec(["cpu"], {}),
        }),
    ]  # fmt: skip


# The second round: a worker group removed and the mode narrowed, a group added, the field removed.
EDITS: tuple[tuple[str, list[dict[str, Any]]], ...] = (
    (
        "np-deny-all",
        [
            {"op": "remove", "path": "/spec/workerGroupSpecs/1"},
            {"op": "replace", "path": "/spec/networkPolicy/mode", "value": "DenyAllIngress"},
        ],
    ),
    ("np-ingress", [{"op": "add", "path": "/spec/workerGroupSpecs/-", "value": _group("extra")}]),
    ("np-egress", [{"op": "remove", "path": "/spec/networkPolicy"}]),
)


# --- the two sides ---------------------------------------------------------------------------


def _project(obj: dict[str, Any]) -> dict[str, Any]:
    """What is compared: a NetworkPolicy whole; a RayCluster's stored `spec.networkPolicy`; a
    RayJob's cluster name only (it names the generated cluster's policies)."""
    kind, meta = obj["kind"], obj["metadata"]
    if kind == "NetworkPolicy":
        return obj
    if kind == "RayCluster":
        owner = {"name": meta["name"], "namespace": meta["namespace"]}
        return {"kind": kind, "metadata": owner, "spec": {"networkPolicy": obj["spec"].get("networkPolicy")}}
    status = {"rayClusterName": (obj.get("status") or {}).get("rayClusterName")}
    return {
        "kind": kind,
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "status": status,
    }


def snapshot(cluster: LocalCluster) -> list[dict[str, Any]]:
    kinds = "networkpolicies.networking.k8s.io,rayclusters.ray.io,rayjobs.ray.io"
    out = cluster.kubectl("get", kinds, "-n", NAMESPACE, "-o", "json").stdout
    return [_project(item) for item in json.loads(out)["items"]]


def settled(cluster: LocalCluster, ready: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
    """Poll until `ready` holds and nothing changed for SETTLE_QUIET_S (or the deadline passed)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    last, quiet_since = "", time.monotonic()
    while True:
        items = snapshot(cluster)
        for item in items:
            item["metadata"].pop("resourceVersion", None)
        fingerprint = json.dumps(items, sort_keys=True)
        if fingerprint != last:
            last, quiet_since = fingerprint, time.monotonic()
        elif ready(items) and time.monotonic() - quiet_since >= SETTLE_QUIET_S:
            return items
        if time.monotonic() > deadline:
            log(f"{cluster.name}: not settled after {SETTLE_TIMEOUT_S:.0f}s; comparing what is there")
            return items
        time.sleep(1.0)


def _policies(items: list[dict[str, Any]]) -> set[str]:
    return {i["metadata"]["name"] for i in items if i["kind"] == "NetworkPolicy"}


def cluster_specs(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The RayCluster specs the manifests make: each RayCluster's, each RayJob's cluster."""
    return [d["spec"] if d["kind"] == "RayCluster" else d["spec"]["rayClusterSpec"] for d in docs]


def expected_policies(docs: list[dict[str, Any]]) -> int:
    """A policy for each head and each worker group of a cluster with `networkPolicy`."""
    specs = [s for s in cluster_specs(docs) if s.get("networkPolicy") is not None]
    return sum(1 + len(s.get("workerGroupSpecs") or []) for s in specs)


def first_round_ready(items: list[dict[str, Any]]) -> bool:
    """Both RayJobs have their cluster and every cluster has its policies."""
    jobs = [i for i in items if i["kind"] == "RayJob"]
    made = len(_policies(items))
    return (
        len(jobs) == 2
        and all(j["status"]["rayClusterName"] for j in jobs)
        and made >= expected_policies(manifests())
    )


def second_round_ready(items: list[dict[str, Any]]) -> bool:
    names = _policies(items)
    return "np-ingress-workers-extra" in names and not any(n.startswith("np-egress-") for n in names)


def apply_all(cluster: LocalCluster, docs: list[dict[str, Any]]) -> None:
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    cluster.kubectl("create", "-f", "-", input="\n---\n".join(yaml.safe_dump(d) for d in docs))


def edit_all(cluster: LocalCluster) -> None:
    for name, patch in EDITS:
        cluster.kubectl("patch", "raycluster", name, "-n", NAMESPACE, "--type=json", "-p", json.dumps(patch))


@dataclass(frozen=True)
class Round:
    title: str
    kuberay: list[dict[str, Any]]
    ours: list[dict[str, Any]]

    @property
    def explained(self) -> list[tuple[Difference, str]]:
        return explain(compare(self.kuberay, self.ours), KNOWN_DIFFERENCES)


def policy_summary(items: list[dict[str, Any]]) -> list[str]:
    """One line per NetworkPolicy: its name (the generated clusters' suffix normalised), its policy
    types and how many rules each direction has, so a report of no differences shows what was
    compared."""
    names = random_names(items)
    lines = []
    for item in sorted(items, key=lambda i: str(i["metadata"]["name"])):
        if item["kind"] != "NetworkPolicy":
            continue
        spec = item["spec"]
        name = normalize(item["metadata"]["name"], names)
        counts = f"{len(spec.get('ingress') or [])} ingress, {len(spec.get('egress') or [])} egress rules"
        lines.append(f"  - `{name}`: {'+'.join(spec.get('policyTypes') or [])}, {counts}")
    return lines


def report(rounds: list[Round], started: dt.datetime, command: str) -> str:
    lines = [f"Run {started:%Y-%m-%d %H:%M} UTC at commit `{git_commit()}`: `{command}`.", ""]
    for r in rounds:
        explained = r.explained
        unexplained = sum(1 for _, reason in explained if not reason)
        counts = [sum(1 for i in side if i["kind"] == "NetworkPolicy") for side in (r.kuberay, r.ours)]
        lines.append(
            f"## {r.title}: {counts[0]} NetworkPolicies from KubeRay, {counts[1]} from rayquota; "
            f"{len(explained)} differences, {unexplained} unexplained"
        )
        lines += ["- KubeRay's:", *policy_summary(r.kuberay)]
        for difference, reason in explained:
            lines.append(
                f"- `{difference.where}`: KubeRay `{json.dumps(difference.kuberay)}`, "
                f"rayquota `{json.dumps(difference.ours)}` ({reason or 'UNEXPLAINED'})"
            )
    return "\n".join(lines)


def run(binary: Path, crds: Path, keep: bool, prefix: str, command: str) -> int:
    binaries.ensure_all()
    started = dt.datetime.now(dt.UTC)
    theirs, ours = LocalCluster(name=f"{prefix}-kuberay"), LocalCluster(name=f"{prefix}-rayquota")
    rounds: list[Round] = []
    with ExitStack() as stack:
        for cluster in (theirs, ours):
            cluster.up()
            if not keep:
                stack.callback(cluster.down, purge=True)
        install_crds(theirs, crds)
        install_crds(ours)
        kuberay_argv = peers.kuberay_command(
            metrics_port=free_port(), health_port=free_port(), namespaces=[NAMESPACE]
        )
        kuberay_argv[0] = str(binary)
        our_argv = [
            str(Path(sys.executable).with_name("rayquota")), "run", "--no-leader-elect",
            "--namespace", NAMESPACE, "--metrics-port", str(free_port()), "--health-port", str(free_port()),
        ]  # fmt: skip
        sides: tuple[tuple[list[str], dict[str, str], LocalCluster, str], ...] = (
            ([*kuberay_argv, f"--feature-gates={GATES}"], {}, theirs, "kuberay"),
            (our_argv, {"RAYQUOTA_FEATURE_GATES": GATES}, ours, "rayquota"),
        )
        for argv, env, cluster, name in sides:
            log_path = cluster.log_dir / f"{name}-operator.log"
            stack.enter_context(PeerProcess(argv, kubeconfig=cluster.kubeconfig, log_path=log_path, env=env))
        docs = manifests()
        for cluster in (theirs, ours):
            apply_all(cluster, docs)
        both = [settled(c, first_round_ready) for c in (theirs, ours)]
        rounds.append(Round("As created", *both))
        for cluster in (theirs, ours):
            edit_all(cluster)
        both = [settled(c, second_round_ready) for c in (theirs, ours)]
        rounds.append(Round("After the edits", *both))
    print(report(rounds, started, command))
    return 1 if any(not reason for r in rounds for _, reason in r.explained) else 0


def main() -> int:
    harness.stop_on_signals()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kuberay-binary", type=Path, required=True, help="KubeRay v1.7.0's operator")
    parser.add_argument("--kuberay-crds", type=Path, required=True, help="its CRD directory")
    parser.add_argument("--keep", action="store_true", help="leave both clusters running afterwards")
    parser.add_argument(
        "--cluster-prefix", default="netpol", help="clusters <prefix>-kuberay, <prefix>-rayquota"
    )
    args = parser.parse_args()
    command = shlex.join(["python", "benchmarks/kuberay_network_policy.py", *sys.argv[1:]])
    return run(args.kuberay_binary, args.kuberay_crds, args.keep, args.cluster_prefix, command)


if __name__ == "__main__":
    raise SystemExit(main())
