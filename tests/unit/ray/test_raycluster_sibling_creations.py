"""The RayClusters of one queued object share one pod budget, and the caps count the other
clusters' pods from the cache. A sibling's creations not yet in the cache hold this cluster's
creations back, so two scale-ups at once never both pass (the gate matrix's incremental-upgrade
cells saw 3 GPUs live under an admission of 2 when the test's two autoscaler writes landed
milliseconds apart)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from rayquota.operator.core import ObjectKey
from rayquota.operator.core.expectations import Expectations
from rayquota.operator.ray.raycluster.reconciler import RayClusterReconciler


def cluster(name: str, owner_uid: str | None) -> dict[str, Any]:
    refs = [{"kind": "RayService", "name": "svc", "uid": owner_uid, "controller": True}] if owner_uid else []
    return {"metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}", "ownerReferences": refs}}


class Store:
    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = list(objects)

    def list(self, namespace: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["metadata"]["namespace"] == namespace]


def in_flight(reconciler: Any, obj: dict[str, Any]) -> bool:
    return RayClusterReconciler._sibling_creations_in_flight(
        cast(RayClusterReconciler, reconciler), obj, ObjectKey.of(obj)
    )


def test_a_siblings_creations_not_yet_seen_hold_this_clusters_back_until_they_are() -> None:
    old, new, stranger = cluster("svc-old", "svc-uid"), cluster("svc-new", "svc-uid"), cluster("other", "x")
    expectations = Expectations()
    reconciler = SimpleNamespace(
        clusters=SimpleNamespace(store=Store(old, new, stranger)), expectations=expectations
    )
    assert not in_flight(reconciler, new)

    expectations.expect_creations(ObjectKey.of(old), ["svc-old-worker-a"])  # the old one scales up
    assert in_flight(reconciler, new)  # the new one's scale-up waits
    assert not in_flight(reconciler, old)  # its own creations are not a sibling's
    assert not in_flight(reconciler, stranger)  # another object's clusters have their own budget

    expectations.observed_created(ObjectKey.of(old), "svc-old-worker-a")  # the cache has it now
    assert not in_flight(reconciler, new)


def test_a_cluster_of_no_owner_has_no_siblings() -> None:
    alone, other = cluster("alone", None), cluster("other", None)
    expectations = Expectations()
    expectations.expect_creations(ObjectKey.of(other), ["other-head"])
    reconciler = SimpleNamespace(
        clusters=SimpleNamespace(store=Store(alone, other)), expectations=expectations
    )
    assert not in_flight(reconciler, alone)
