"""Two `rayquota run` processes against the real control plane: exactly one reconciles, and the
other takes over when the leader dies, is stopped, or loses its Lease."""

from __future__ import annotations

import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.polling import wait_for
from tests.quota import Quota, cluster_pods, pending_workload, sample_cluster, workload_of
from tests.quota import quota as quota  # the fixture

REPO = Path(__file__).resolve().parents[2]
LEASE = "rayquota-operator"
LEASE_DURATION_S = 4
STARTED = f"rayquota operator {importlib.metadata.version('rayquota')} starting"
# Logged once the caches have synced and the controllers run: only a leader gets there.
RECONCILING = "operator ready:"


pytestmark = pytest.mark.usefixtures("crds_installed")


class Operator:
    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc = proc
        self.log = log

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def owns(self, identity: str | None) -> bool:
        return identity is not None and f"-{self.pid}-" in identity


@pytest.fixture
def start_operator(control_plane: Any, namespace: str, tmp_path: Path) -> Iterator[Callable[[], Operator]]:
    started: list[Operator] = []

    def start() -> Operator:
        log = tmp_path / f"operator-{len(started)}.log"
        env = dict(
            os.environ,
            KUBECONFIG=str(control_plane.kubeconfig),
            # The Lease lives in the test's namespace, so tests never compete for one Lease.
            RAYQUOTA_OPERATOR_NAMESPACE=namespace,
            RAYQUOTA_LEASE_DURATION=str(LEASE_DURATION_S),
            RAYQUOTA_LEASE_RENEW_PERIOD="1",
            RAYQUOTA_LEASE_RETRY_PERIOD="0.5",
            RAYQUOTA_VISIBILITY="false",  # killed leaders would leave their APIService behind
        )
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "rayquota.cli",
                    "run",
                    "--health-port=0",
                    "--metrics-port=0",
                    "-n",
                    namespace,
                ],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
            )
        operator = Operator(proc, log)
        started.append(operator)
        return operator

    try:
        yield start
    finally:
        for operator in started:
            if operator.proc.poll() is None:
                operator.proc.kill()
            operator.proc.wait(timeout=30)




def lease_spec(cluster: Any, namespace: str) -> dict[str, Any] | None:
    got = cluster.kubectl("get", "lease", LEASE, "-n", namespace, "-o", "json", check=False)
    if got.returncode != 0:
        return None
    spec: dict[str, Any] = json.loads(got.stdout)["spec"]
    return spec


def leader_of(cluster: Any, namespace: str, operators: list[Operator]) -> Operator | None:
    spec = lease_spec(cluster, namespace) or {}
    return next((op for op in operators if op.owns(spec.get("holderIdentity"))), None)


def await_one_leader(cluster: Any, namespace: str, a: Operator, b: Operator) -> tuple[Operator, Operator]:
    leader = wait_for("a Lease holder", lambda: leader_of(cluster, namespace, [a, b]))
    standby = b if leader is a else a
    wait_for("the leader to start reconciling", lambda: RECONCILING in leader.output())
    wait_for("the standby to report that it waits", lambda: "waiting for leadership" in standby.output())
    assert STARTED in standby.output() and RECONCILING not in standby.output(), standby.output()
    assert standby.proc.poll() is None, standby.output()
    return leader, standby


def raycluster_state(cluster: Any, namespace: str, name: str) -> str | None:
    got = cluster.kubectl("get", "raycluster", name, "-n", namespace, "-o", "json", check=False)
    if got.returncode != 0:
        return None
    state: str | None = (json.loads(got.stdout).get("status") or {}).get("state")
    return state


def worker_pods(cluster: Any, namespace: str, name: str) -> set[str]:
    got = cluster.kubectl(
        "get", "pods", "-n", namespace, "-l", f"ray.io/cluster={name},ray.io/node-type=worker", "-o", "json"
    )
    return {
        pod["metadata"]["name"]
        for pod in json.loads(got.stdout)["items"]
        if not pod["metadata"].get("deletionTimestamp")
    }


def test_one_leader_reconciles_and_a_standby_takes_over_when_it_dies(
    control_plane: Any, namespace: str, start_operator: Callable[[], Operator]
) -> None:
    a, b = start_operator(), start_operator()
    leader, standby = await_one_leader(control_plane, namespace, a, b)
    before = lease_spec(control_plane, namespace)
    assert before is not None and before["leaseDurationSeconds"] == LEASE_DURATION_S

    sample = yaml.safe_load((REPO / "samples" / "quickstart" / "raycluster.yaml").read_text())
    sample["metadata"]["namespace"] = namespace
    name = sample["metadata"]["name"]
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(sample))
    wait_for(
        "the RayCluster to become ready",
        lambda: raycluster_state(control_plane, namespace, name) == "ready",
        90,
    )

    def two_workers() -> set[str] | None:
        pods = worker_pods(control_plane, namespace, name)
        return pods if len(pods) == 2 else None

    workers = wait_for("two worker pods", two_workers)
    # Renewals leave the transition count alone; only the failover below may change it.
    transitions = (lease_spec(control_plane, namespace) or {})["leaseTransitions"]
    assert RECONCILING not in standby.output()

    leader.proc.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    wait_for("the standby to take the Lease", lambda: leader_of(control_plane, namespace, [a, b]) is standby)
    takeover_s = time.monotonic() - killed_at
    assert takeover_s < 2 * LEASE_DURATION_S, f"takeover took {takeover_s:.1f}s"
    after = lease_spec(control_plane, namespace)
    assert after is not None
    assert after["leaseTransitions"] == transitions + 1
    assert after["holderIdentity"] != before["holderIdentity"]
    wait_for("the new leader to start reconciling", lambda: RECONCILING in standby.output())

    # The new leader reconciles the existing cluster: a deleted worker is replaced.
    victim = sorted(workers)[0]
    control_plane.kubectl("delete", "pod", victim, "-n", namespace, "--wait=false")
    wait_for(
        "a replacement worker pod",
        lambda: (pods := two_workers()) is not None and victim not in pods,
        60,
    )
    assert standby.proc.poll() is None, standby.output()


@pytest.mark.parametrize(
    "stop_signal",
    [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
    ids=["SIGTERM (kubelet, kill)", "SIGINT (Ctrl-C in make run)", "SIGHUP (its terminal closed)"],
)
def test_a_clean_stop_releases_the_lease_to_the_standby(
    control_plane: Any, namespace: str, start_operator: Callable[[], Operator], stop_signal: signal.Signals
) -> None:
    a, b = start_operator(), start_operator()
    leader, standby = await_one_leader(control_plane, namespace, a, b)
    transitions = (lease_spec(control_plane, namespace) or {})["leaseTransitions"]

    leader.proc.send_signal(stop_signal)
    assert leader.proc.wait(timeout=30) == 0, leader.output()
    assert "released lease" in leader.output()
    # Released before the process exited: the Lease is free or already the standby's, never expired-held.
    spec = lease_spec(control_plane, namespace) or {}
    holder = spec.get("holderIdentity")
    assert holder is None or standby.owns(holder), spec
    released_at = time.monotonic()
    wait_for(
        "the standby to take the released Lease",
        lambda: leader_of(control_plane, namespace, [a, b]) is standby,
    )
    # Faster than an expiry could explain (the lease was renewed at most 1 s before the signal).
    assert time.monotonic() - released_at < LEASE_DURATION_S - 1
    assert (lease_spec(control_plane, namespace) or {})["leaseTransitions"] == transitions + 1
    wait_for("the new leader to start reconciling", lambda: RECONCILING in standby.output())


def test_a_leader_that_loses_its_lease_stops_and_exits_non_zero(
    control_plane: Any, namespace: str, start_operator: Callable[[], Operator]
) -> None:
    leader = start_operator()
    wait_for("the Lease holder", lambda: leader_of(control_plane, namespace, [leader]))
    wait_for("reconciling", lambda: RECONCILING in leader.output())
    # Someone else writes the Lease (as a replica that judged it expired would).
    control_plane.kubectl(
        "patch",
        "lease",
        LEASE,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec":{"holderIdentity":"intruder"}}',
    )
    code = leader.proc.wait(timeout=3 * LEASE_DURATION_S)
    assert code == 1, leader.output()
    assert "lost leadership" in leader.output()
    assert "rayquota operator stopped" in leader.output()
    assert (lease_spec(control_plane, namespace) or {}).get("holderIdentity") == "intruder"


def admitted_at(workload: dict[str, Any] | None) -> str | None:
    conditions = ((workload or {}).get("status") or {}).get("conditions") or []
    return next(
        (c["lastTransitionTime"] for c in conditions if c["type"] == "Admitted" and c["status"] == "True"),
        None,
    )


def test_only_the_leader_admits_and_a_takeover_admits_nothing_twice(
    control_plane: Any, namespace: str, quota: Quota, start_operator: Callable[[], Operator]
) -> None:
    a, b = start_operator(), start_operator()
    leader, standby = await_one_leader(control_plane, namespace, a, b)
    first = sample_cluster(namespace)  # 4 of the queue's 8 GPUs
    name = first["metadata"]["name"]
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(first))
    admitted = wait_for(
        "the leader to admit the first cluster",
        lambda: (w := workload_of(control_plane, namespace, name)) and admitted_at(w) and w,
        90,
    )
    pods = wait_for(
        "its four pods", lambda: (p := cluster_pods(control_plane, namespace, name)) and len(p) == 4 and p
    )
    assert RECONCILING not in standby.output()  # the standby has not even started its controllers

    leader.proc.send_signal(signal.SIGKILL)
    wait_for("the standby to take the Lease", lambda: leader_of(control_plane, namespace, [a, b]) is standby)
    wait_for("the new leader to start", lambda: RECONCILING in standby.output())
    # The new leader admits, and rebuilt the quota from the admitted Workload: of the 4 GPUs
    # left, a cluster needing 4 is admitted and one needing 2 more waits (had the new leader
    # forgotten the first admission, both would fit).
    second = sample_cluster(namespace, "second", gpu_workers=2)
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(second))
    wait_for(
        "the new leader to admit the second cluster",
        lambda: admitted_at(workload_of(control_plane, namespace, "second")),
        90,
    )
    third = sample_cluster(namespace, "third", gpu_workers=1)
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(third))
    wait_for(
        "the third cluster pending with a reason",
        lambda: pending_workload(control_plane, namespace, "third", because="nvidia.com/gpu"),
    )
    assert not cluster_pods(control_plane, namespace, "third")
    # Admitted once: the same admission, never re-written, and the same pods.
    still = workload_of(control_plane, namespace, name)
    assert admitted_at(still) == admitted_at(admitted)
    assert (still or {})["status"]["admission"] == admitted["status"]["admission"]
    assert {p["metadata"]["uid"] for p in cluster_pods(control_plane, namespace, name)} == {
        p["metadata"]["uid"] for p in pods
    }
    assert standby.proc.poll() is None, standby.output()
