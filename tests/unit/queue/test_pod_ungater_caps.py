"""The pod ungater beside KubeRay reads the caps (the demand against the admission, the costly
read) only when a pod waits at the gate or a live pod never waited there; a pod event of a
cluster whose pods all went through the gate reads nothing (issue #36's hot path)."""

from __future__ import annotations

import asyncio
from typing import Any

from rayquota.operator.core import ObjectKey
from rayquota.operator.queue.gating import pod_gate
from rayquota.operator.queue.gating.pod_release import PODS_BEYOND
from rayquota.operator.queue.gating.pod_ungater import PodUngater
from rayquota.operator.ray.vocabulary import labels
from tests.unit.queue.fakes import FakeInformer
from tests.unit.queue.test_pod_release_words import Recorder

KEY = ObjectKey("team-a", "c")
CLUSTER = {"metadata": {"name": "c", "namespace": "team-a", "uid": "c-uid"}, "spec": {}}


class Client:
    def __init__(self) -> None:
        self.patched: list[str] = []

    async def json_patch(self, path: str, patch: Any) -> None:
        self.patched.append(path)


class Manager:
    def __init__(self) -> None:
        self.recorder = Recorder()
        self.client = Client()


class Objects:
    """The caches the ungater reads: one cluster and its pods."""

    def __init__(self) -> None:
        self.cluster_pods: list[dict[str, Any]] = []
        self.informers = {"RayCluster": FakeInformer([CLUSTER])}

    def pods(self, watch: Any, namespace: str, value: str) -> list[dict[str, Any]]:
        return self.cluster_pods


class CountingGate:
    """caps None: the cluster is under no quota (all gated pods go through)."""

    def __init__(self) -> None:
        self.caps_reads = 0

    def caps_for(self, cluster: Any) -> None:
        self.caps_reads += 1


def worker(name: str, *, gated: bool) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"{name}-uid",
            "labels": {labels.RAY_CLUSTER: "c", labels.RAY_GROUP: "gpu"},
        },
        "spec": {"containers": [{"name": "ray-worker"}]},
        "status": {"phase": "Pending" if gated else "Running"},
    }
    if gated:
        pod["spec"]["schedulingGates"] = [{"name": pod_gate.SCHEDULING_GATE}]
    return pod


def ungater() -> tuple[PodUngater, Objects, CountingGate, Manager]:
    manager, objects, gate = Manager(), Objects(), CountingGate()
    return PodUngater(manager, objects, gate), objects, gate, manager  # type: ignore[arg-type]


def test_a_pod_event_with_every_pod_through_the_gate_reads_no_caps() -> None:
    pods, objects, gate, manager = ungater()
    objects.cluster_pods = [worker("w-1", gated=True)]
    asyncio.run(pods.reconcile(KEY))
    assert gate.caps_reads == 1  # a pod waits: the caps decide whether it goes through
    assert len(manager.client.patched) == 1
    objects.cluster_pods = [worker("w-1", gated=False)]  # the cache shows it let through
    for _ in range(5):  # its status changes: Running, Ready, ...
        asyncio.run(pods.reconcile(KEY))
    assert gate.caps_reads == 1, "a pod event with nothing beyond the gate read the caps"
    assert manager.recorder.posted == []


def test_a_pod_that_never_waited_at_the_gate_is_checked_against_the_caps() -> None:
    """Created without the gate (the pod webhooks off): read the caps, and flag it when the
    admission does not cover it (here, nothing is admitted)."""
    from rayquota.operator.queue.gating.caps import NOTHING

    pods, objects, gate, manager = ungater()
    objects.cluster_pods = [worker("w-1", gated=False)]
    gate.caps_for = lambda cluster: (setattr(gate, "caps_reads", gate.caps_reads + 1), NOTHING)[1]  # type: ignore[method-assign]
    asyncio.run(pods.reconcile(KEY))
    assert gate.caps_reads == 1
    assert [reason for reason, _ in manager.recorder.posted] == [PODS_BEYOND]
