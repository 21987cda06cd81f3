"""What the control-plane fault tests share: the operator as a process of its own (it can be
killed, its log read), a second API server on the same etcd for the tests' own watches (so
restarting the operator's API server cuts the operator's watches, never the sampler's), the
requests the operator sent (from the API server's audit log), and what the sampler saw of
admissions."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from benchmarks.harness import _epoch
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.processes import launch, stop_groups
from rayquota.ports import free_port
from tests.gate_sampler import GateSampler
from tests.polling import wait_for

REPO = Path(__file__).resolve().parents[3]
PREFIX = "f"  # the namespaces of this folder: f-<test>-<hex>
OPERATOR_CLIENT = "rayquota"  # the operator's user agent: rayquota/<version>


def route_dashboards(map_file: Path, routes: Mapping[str, str]) -> None:
    """The operator's local dashboard resolver map (re-read on every call)."""
    current = json.loads(map_file.read_text() or "{}") if map_file.exists() else {}
    map_file.write_text(json.dumps({**current, **routes}))


class ObserverApiServer:
    """A second kube-apiserver on the cluster's etcd, on a port of its own, without an audit
    log: the tests watch through it, so a restart of the cluster's API server never cuts the
    sampler's watches (an API server restarted empties its watch cache, and a watch resumed
    from an older resourceVersion is refused: the states in between would be lost)."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.kubeconfig = cluster.state_dir / "observer-kubeconfig"
        self.pid: int | None = None

    def start(self) -> ObserverApiServer:
        record = self.cluster.processes()["kube-apiserver"]
        port = free_port()
        argv = [
            f"--secure-port={port}" if str(arg).startswith("--secure-port=") else str(arg)
            for arg in record["argv"]  # type: ignore[attr-defined]
            if not str(arg).startswith("--audit-")
        ]
        self.pid = launch(argv, self.cluster.log_dir / "observer-apiserver.log", self.cluster.state_dir)
        config = yaml.safe_load(self.cluster.kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
        self.kubeconfig.write_text(yaml.safe_dump(config))
        wait_for("the observer API server's /readyz", self._ready, timeout_s=90, interval_s=0.5)
        return self

    def _ready(self) -> bool:
        got = self.cluster.kubectl(
            "--kubeconfig", str(self.kubeconfig), "get", "--raw", "/readyz", check=False
        )
        return got.returncode == 0

    def stop(self) -> None:
        if self.pid is not None:
            stop_groups([self.pid])
            self.pid = None


class Request(NamedTuple):
    at: float  # received, epoch seconds
    verb: str  # the audit log's: get, list, watch, create, update, patch, delete
    resource: str
    name: str
    code: int

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300


WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})


class OperatorRequests:
    """The operator's requests in the cluster's API server audit log, read as it grows (from
    where the log ended when this was made)."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.log = cluster.audit_log
        self._offset = self.log.stat().st_size if self.log.exists() else 0
        self._seen: list[Request] = []

    def since(self, since: float) -> list[Request]:
        """Each request received at `since` (epoch s) or later."""
        with self.log.open("rb") as log:
            log.seek(self._offset)
            chunk = log.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._offset += len(complete)
        for line in complete.decode().splitlines():
            if line.strip():
                self._take(json.loads(line))
        return [r for r in self._seen if r[0] >= since]

    def quiet(self, verbs: frozenset[str] | None, seconds: float) -> bool:
        """No request (with one of `verbs`, if given) in the last `seconds`."""
        recent = self.since(time.time() - seconds)
        return not any(verbs is None or r.verb in verbs for r in recent)

    def _take(self, event: Mapping[str, Any]) -> None:
        if not str(event.get("userAgent", "")).startswith(f"{OPERATOR_CLIENT}/"):
            return
        # A request counts once: a watch when it starts (it may never end), the rest when done.
        if event.get("stage") != ("ResponseStarted" if event.get("verb") == "watch" else "ResponseComplete"):
            return
        ref = event.get("objectRef") or {}
        received = _epoch(str(event.get("requestReceivedTimestamp", "")))
        code = int((event.get("responseStatus") or {}).get("code") or 0)
        name = str(ref.get("name", ""))
        self._seen.append(Request(received, str(event.get("verb")), str(ref.get("resource", "")), name, code))


def admissions(sampler: GateSampler) -> dict[str, list[dict[str, Any]]]:
    """Workload name -> each admission it was given, in the API server's order: a new entry
    whenever `status.admission` goes from absent to present (a Workload admitted twice without
    an eviction in between has two)."""
    seen: dict[str, list[dict[str, Any]]] = {}
    holding: dict[str, bool] = {}
    feed = next(f for f in sampler.feeds if f.kind == "Workload")
    for version in sorted(feed.versions, key=lambda v: v.revision):
        name = version.key[1]
        admission = None if version.deleted else (version.obj.get("status") or {}).get("admission")
        if admission and not holding.get(name):
            seen.setdefault(name, []).append(dict(admission))
        holding[name] = bool(admission)
    return seen


def evicted(sampler: GateSampler, workload: str) -> bool:
    """Was the Workload ever evicted (preempted, deactivated, requeued)?"""
    return sampler.ever(
        "Workload",
        lambda w: (
            w["metadata"]["name"] == workload
            and any(
                c.get("type") == "Evicted" and c.get("status") == "True"
                for c in (w.get("status") or {}).get("conditions") or []
            )
        ),
    )


def admitted_once(sampler: GateSampler) -> dict[str, int]:
    """Workloads admitted more than once without an eviction in between (should be empty)."""
    return {
        name: len(given)
        for name, given in admissions(sampler).items()
        if len(given) > 1 and not evicted(sampler, name)
    }


def names_of(sampler: GateSampler, kind: str) -> set[str]:
    return set(sampler.current(kind))
