"""The pure view models of the Queue order and Cohorts pages, over a hand-fed cache and the
engine copy (:class:`QueueModel`)."""

from __future__ import annotations

from rayquota.dashboard.queue_model import QueueModel
from rayquota.dashboard.views.cohorts import cohorts_page
from rayquota.dashboard.views.common import HIDDEN, Page
from rayquota.dashboard.views.queue_order import QueueScope, queue_order_page
from rayquota.dashboard.views.workload_page import pod_sets as workload_page_pod_sets

from .cache_fixture import cluster_queue, feed, flavor, local_queue, new_cache, workload

T0 = "2026-01-01T00:00:00Z"


def three_teams() -> QueueModel:
    """ClusterQueue gpu (8 GPUs, full) shared by LocalQueue q of team-a and team-b."""
    cache = new_cache()
    feed(cache.flavors, flavor())
    feed(cache.cluster_queues, cluster_queue("gpu", 8))
    feed(cache.local_queues, local_queue("team-a", "q", "gpu"), local_queue("team-b", "q", "gpu"))
    feed(
        cache.workloads,
        workload("team-b", "running", "q", 8, created=T0, admitted_to="gpu"),
        workload("team-b", "old", "q", 4, created="2026-01-01T00:01:00Z"),
        workload("team-a", "new", "q", 2, created="2026-01-01T00:02:00Z"),
        workload("team-a", "urgent", "q", 1, created="2026-01-01T00:03:00Z", priority=10),
    )
    return QueueModel(cache)


def test_pending_in_engine_order_with_its_sentence_priority_and_age() -> None:
    model = three_teams()
    page = queue_order_page(model.snapshot(), QueueScope("gpu"), None, Page(), now=1767225900.0)
    rows = page["pending"]["items"]
    assert [(r["namespace"], r["name"], r["position"]) for r in rows] == [
        ("team-a", "urgent", 1),
        ("team-b", "old", 2),
        ("team-a", "new", 3),
    ]
    assert rows[1]["reason"] == "needs 4 nvidia.com/gpu in flavor a100; ClusterQueue gpu has 0 of 8 free"
    assert rows[0]["priority"] == 10 and rows[1]["ageSeconds"] == 1767225900 - 1767225660
    assert rows[2]["needs"] == "nvidia.com/gpu 2" and rows[2]["inadmissible"] is True
    assert page["holders"] == [
        {
            "hidden": False,
            "namespace": "team-b",
            "name": "running",
            "holds": "nvidia.com/gpu 8",
            "evicting": False,
        }
    ]
    assert page["free"][0]["free"]["text"] == "0" and page["free"][0]["nominal"]["text"] == "8"


def test_rows_of_namespaces_the_user_cannot_list_keep_their_place_without_a_name() -> None:
    page = queue_order_page(three_teams().snapshot(), QueueScope("gpu"), frozenset({"team-a"}), Page())
    rows = page["pending"]["items"]
    assert [r["position"] for r in rows] == [1, 2, 3]
    assert rows[1] == {
        "position": 2,
        "inadmissible": True,
        "scaleUp": False,
        "priority": 0,
        "ageSeconds": rows[1]["ageSeconds"],
        "hidden": True,
        "name": HIDDEN,
    }
    assert page["holders"] == [{"hidden": True, "name": HIDDEN}]


def test_a_local_queue_lists_its_own_workloads_at_their_cluster_queue_positions() -> None:
    page = queue_order_page(three_teams().snapshot(), QueueScope("gpu", ("team-a", "q")), None, Page())
    assert [(r["name"], r["position"]) for r in page["pending"]["items"]] == [("urgent", 1), ("new", 3)]


def test_paging_cuts_the_rows() -> None:
    page = queue_order_page(three_teams().snapshot(), QueueScope("gpu"), None, Page(offset=1, limit=1))
    assert page["pending"]["total"] == 3 and [r["name"] for r in page["pending"]["items"]] == ["old"]


def test_names_in_a_sentence_of_hidden_namespaces_are_replaced() -> None:
    cache = new_cache()
    feed(cache.flavors, flavor())
    feed(cache.cluster_queues, cluster_queue("strict", 0, queueingStrategy="StrictFIFO"))
    feed(cache.local_queues, local_queue("team-a", "q", "strict"), local_queue("team-b", "q", "strict"))
    feed(
        cache.workloads,
        workload("team-b", "first", "q", 1, created=T0),
        workload("team-a", "second", "q", 1, created="2026-01-01T00:01:00Z"),
    )
    snapshot = QueueModel(cache).snapshot()
    everyone = queue_order_page(snapshot, QueueScope("strict"), None, Page())["pending"]["items"]
    assert (
        "waiting behind team-b/first at the head of StrictFIFO ClusterQueue strict" in everyone[1]["reason"]
    )
    team_a = queue_order_page(snapshot, QueueScope("strict"), frozenset({"team-a"}), Page())["pending"][
        "items"
    ]
    assert team_a[1]["reason"].startswith(
        f"waiting behind {HIDDEN} at the head of StrictFIFO ClusterQueue strict"
    )


def test_a_grown_demand_waits_as_a_scale_up_slice() -> None:
    cache = new_cache()
    feed(cache.flavors, flavor())
    feed(cache.cluster_queues, cluster_queue("gpu", 4))
    feed(cache.local_queues, local_queue("ns", "q", "gpu"))
    feed(
        cache.workloads,
        workload("ns", "service", "q", 4, created=T0, admitted_to="gpu", count=2, admitted_count=1),
    )
    rows = queue_order_page(QueueModel(cache).snapshot(), QueueScope("gpu"), None, Page())["pending"]["items"]
    assert len(rows) == 1 and rows[0]["name"] == "service" and rows[0]["scaleUp"] is True
    assert "0 of 4 free" in rows[0]["reason"]


def test_cohorts_page_tree_and_bars() -> None:
    cache = new_cache()
    feed(cache.flavors, flavor())
    feed(
        cache.cluster_queues,
        cluster_queue("a", 4, cohort="research", borrowing=4),
        cluster_queue("b", 4, cohort="research", stopPolicy="Hold"),
    )
    feed(cache.local_queues, local_queue("ns", "q", "a"))
    feed(cache.workloads, workload("ns", "big", "q", 6, created=T0, admitted_to="a"))
    page = cohorts_page(QueueModel(cache).snapshot(), cache.cluster_queues.store.list())
    assert page["tree"] == [
        {
            "name": "research",
            "kind": "Cohort",
            "children": [
                {"name": "a", "kind": "ClusterQueue", "children": []},
                {"name": "b", "kind": "ClusterQueue", "children": []},
            ],
        }
    ]
    a, b = page["clusterQueues"]
    bar = a["flavors"][0]["resources"][0]
    assert (bar["usage"]["text"], bar["nominal"]["text"], bar["borrowingLimit"]["text"]) == ("6", "4", "4")
    assert bar["borrowed"]["text"] == "2" and bar["available"]["text"] == "2"  # 4 + 4 lent by b, 6 used
    assert bar["lendingLimit"] is None
    assert a["admitted"] == 1 and a["pending"] == {"active": 0, "inadmissible": 0}
    assert b["stopPolicy"] == "Hold"
    research = page["cohorts"][0]
    assert research["name"] == "research" and research["flavors"][0]["resources"][0]["usage"]["text"] == "6"


def test_the_dashboard_says_a_reason_in_the_words_the_cli_and_the_events_use() -> None:
    cache = new_cache()
    feed(cache.flavors, flavor())
    feed(cache.cluster_queues, cluster_queue("gpu", 16))
    feed(cache.local_queues, local_queue("ns", "q", "gpu"))
    holder = workload("ns", "holder", "q", 8, created=T0, admitted_to="gpu")
    alpha = workload("ns", "alpha", "q", 6, created=T0)
    alpha["spec"]["podSets"].append({"name": "spare", "count": 1, "requests": {"nvidia.com/gpu": "6"}})
    alpha["metadata"]["annotations"] = {
        "rayquota.io/pod-set-names": '{"gpu":"worker group `gpu` of RayJob `alpha`",'
        '"spare":"worker group `spare` of RayJob `alpha`"}'
    }
    feed(cache.workloads, holder, alpha, workload("ns", "huge", "q", 17, created="2026-01-01T00:01:00Z"))
    snapshot = QueueModel(cache).snapshot()
    page = queue_order_page(snapshot, QueueScope("gpu"), None, Page())
    rows = {r["name"]: r for r in page["pending"]["items"]}
    words = "worker group `spare` of RayJob `alpha`: needs 6 nvidia.com/gpu"
    assert rows["alpha"]["reason"].startswith(words)
    assert "pod set" not in rows["alpha"]["reason"]
    assert snapshot.reason_of("ns/alpha") == rows["alpha"]["reason"]
    # Beyond the queue's maximum capacity: marked, not shown as waiting for its turn.
    assert rows["huge"]["neverFits"] is True and rows["alpha"]["neverFits"] is False
    assert "request > maximum capacity (17 > 16)" in rows["huge"]["reason"]


def test_the_cohorts_page_shows_the_operators_inactive_condition() -> None:
    cache = new_cache()
    queue = cluster_queue("gpu", 8)  # its flavor a100 was never created
    queue["status"] = {
        "conditions": [
            {
                "type": "Active",
                "status": "False",
                "reason": "FlavorNotFound",
                "message": "Can't admit new workloads: ResourceFlavor a100 not found",
            }
        ]
    }
    feed(cache.cluster_queues, queue)
    page = cohorts_page(QueueModel(cache).snapshot(), cache.cluster_queues.store.list())
    [entry] = page["clusterQueues"]
    assert entry["inactive"] == "FlavorNotFound: Can't admit new workloads: ResourceFlavor a100 not found"


def test_the_workload_page_names_each_pod_set_as_its_user_knows_it_beside_what_was_admitted() -> None:
    """A scale-up waiting: the page's pod set rows say which worker group asks for more."""
    grown = workload("ns", "rc", "q", 1, created=T0, admitted_to="gpu", count=2, admitted_count=1)
    grown["metadata"]["annotations"] = {
        "rayquota.io/pod-set-names": '{"gpu":"worker group `gpu` of cluster `rc`"}'
    }
    (row,) = workload_page_pod_sets(grown)
    assert row["words"] == "worker group `gpu` of cluster `rc`"
    assert (row["count"], row["admittedCount"]) == (2, 1)
