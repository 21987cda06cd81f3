from __future__ import annotations

from typing import Any

from rayquota.operator.core.cache.scope import NamespaceScope
from rayquota.operator.core.cache.store import Store, label_indexer, owner_uids
from rayquota.operator.core.expectations import Expectations
from rayquota.operator.core.resources import ObjectKey, Resource
from rayquota.operator.core.status import without_nulls


def pod(name: str, owner: str | None = None, cluster: str | None = None, ns: str = "ns") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": {}}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "kind": "RayCluster", "name": "c"}]
    if cluster:
        meta["labels"]["ray.io/cluster"] = cluster
    return {"metadata": meta}


def test_indexes_follow_updates_and_removals() -> None:
    store = Store({"owner": owner_uids, "cluster": label_indexer("ray.io/cluster")})
    store.upsert(pod("a", owner="u1", cluster="c1"))
    store.upsert(pod("b", owner="u1", cluster="c1"))
    assert [p["metadata"]["name"] for p in store.by_index("owner", "u1")] == ["a", "b"]
    store.upsert(pod("a", owner="u2", cluster="c2"))  # re-owned
    assert [p["metadata"]["name"] for p in store.by_index("owner", "u1")] == ["b"]
    assert [p["metadata"]["name"] for p in store.by_index("cluster", "ns/c2")] == ["a"]
    store.remove(ObjectKey("ns", "b"))
    assert store.by_index("owner", "u1") == []
    assert len(store) == 1


def test_an_indexer_added_later_indexes_what_is_stored() -> None:
    store = Store()
    store.upsert(pod("a", owner="u1"))
    store.add_indexer("owner", owner_uids)
    assert len(store.by_index("owner", "u1")) == 1


def test_expectations_block_until_observed_or_expired() -> None:
    now = [0.0]
    expectations = Expectations(clock=lambda: now[0], timeout_s=300)
    key = ObjectKey("ns", "c")
    assert expectations.satisfied(key)
    expectations.expect_creations(key, [])
    expectations.expect_deletions(key, [])
    assert expectations.satisfied(key), "expecting nothing blocks nothing"
    expectations.expect_creations(key, ["p1", "p2"])
    expectations.expect_deletions(key, ["old"])
    assert not expectations.satisfied(key)
    expectations.observed_created(key, "p1")
    expectations.creation_failed(key, "p2")  # a failed create is never coming
    assert not expectations.satisfied(key)
    expectations.observed_deleted(key, "old")
    assert expectations.satisfied(key)
    expectations.expect_creations(key, ["p3"])
    now[0] = 301.0
    assert expectations.satisfied(key)  # a lost watch event cannot block a cluster for ever


def test_null_and_absent_are_the_same_status() -> None:
    status = {"a": None, "b": {"c": None, "d": 1}, "e": [{"f": None}]}
    assert without_nulls(status) == {"b": {"d": 1}, "e": [{}]}


def test_resource_paths() -> None:
    rc = Resource("ray.io", "v1", "rayclusters", "RayCluster")
    assert rc.path("ns", "x", "status") == "/apis/ray.io/v1/namespaces/ns/rayclusters/x/status"
    assert rc.path() == "/apis/ray.io/v1/rayclusters"
    cq = Resource("rayquota.io", "v1alpha1", "clusterqueues", "ClusterQueue", namespaced=False)
    assert cq.path("ignored", "q") == "/apis/rayquota.io/v1alpha1/clusterqueues/q"
    assert Resource("", "v1", "pods", "Pod").path("ns") == "/api/v1/namespaces/ns/pods"


def test_namespace_scope() -> None:
    assert NamespaceScope.of(None).watch_targets(True) == [None]
    assert NamespaceScope.of(["b", "a"]).watch_targets(True) == ["a", "b"]
    globbed = NamespaceScope.of(["team-*"])
    assert globbed.watch_targets(True) == [None]
    assert globbed.admits("team-x") and not globbed.admits("other")
    assert NamespaceScope.of(["a"]).watch_targets(False) == [None]


def test_a_creation_without_an_answer_stays_expected_until_looked_up() -> None:
    exp = Expectations()
    exp.expect_creations("c", ["p1", "p2"])
    exp.creation_unconfirmed("c", "p1")
    exp.creation_failed("c", "p2")  # not tried after the lost answer
    assert not exp.satisfied("c") and exp.unconfirmed("c") == ["p1"]
    # Found by name: it was stored; still expected until the informer shows it.
    exp.confirmed("c", "p1", exists=True)
    assert exp.unconfirmed("c") == [] and not exp.satisfied("c")
    exp.observed_created("c", "p1")
    assert exp.satisfied("c")


def test_a_creation_without_an_answer_that_is_not_found_failed() -> None:
    exp = Expectations()
    exp.expect_creations("c", ["p1"])
    exp.creation_unconfirmed("c", "p1")
    exp.confirmed("c", "p1", exists=False)
    assert exp.satisfied("c") and exp.unconfirmed("c") == []
    exp.expect_creations("d", ["q"])
    exp.creation_unconfirmed("d", "q")
    exp.forget("d")
    assert exp.unconfirmed("d") == []
