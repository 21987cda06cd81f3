"""The PodsBeyondQuota Warning is said once per change, however often the cluster is reconciled."""

from __future__ import annotations

from typing import Any

from rayquota.operator.core import ObjectKey
from rayquota.operator.queue.gating.pod_release import PODS_BEYOND, PodReleases


class Recorder:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str]] = []

    def post(self, owner: Any, kind: str, reason: str, message: str) -> None:
        self.posted.append((reason, message))


class Manager:
    def __init__(self) -> None:
        self.recorder = Recorder()


def test_pods_beyond_quota_are_said_once_while_nothing_is_held_between_reconciles() -> None:
    manager = Manager()
    releases = PodReleases(manager)  # type: ignore[arg-type]
    key = ObjectKey("ns", "c")
    owner = {"metadata": {"name": "c", "namespace": "ns"}}
    for _ in range(3):  # each reconcile of ungated pods: flagged, then nothing held
        releases.flag_beyond(key, owner, ("worker c-w-1",))
        releases.nothing_held(key)
    assert [reason for reason, _ in manager.recorder.posted] == [PODS_BEYOND]
    releases.flag_beyond(key, owner, ("worker c-w-1", "worker c-w-2"))  # changed: said again
    releases.forget(key)  # the cluster is gone
    releases.flag_beyond(key, owner, ("worker c-w-1",))
    assert len(manager.recorder.posted) == 3
