"""The pending-workloads bodies, pages and discovery documents, as Kueue v0.19.2 shapes them
(pkg/visibility/storage: positions from 0, a LocalQueue's positions counted over the whole
ClusterQueue order, limit/offset bounded), and the request-header identity."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from rayquota.operator.visibility import discovery, summary
from rayquota.operator.visibility.auth import FrontProxy, front_proxy_of, resource_attributes, user_of
from rayquota.operator.visibility.summary import Page, Pending

OWNER = {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "j", "uid": "u", "controller": True}
ORDER = [
    Pending("ns", "w0", "a", 10, "2026-01-01T00:00:00Z", (OWNER,)),
    Pending("ns", "w1", "b", 5),
    Pending("other", "w2", "a", 5),
    Pending("ns", "w3", "a", 0),
    Pending("ns", "w4", "b", 0),
]  # fmt: skip


def names(items: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return [
        (i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])  # type: ignore[index]
        for i in items
    ]


def test_a_cluster_queue_page_counts_local_queue_positions_from_the_start() -> None:
    items = summary.in_cluster_queue(ORDER, Page())
    assert names(items) == [("w0", 0, 0), ("w1", 1, 0), ("w2", 2, 0), ("w3", 3, 1), ("w4", 4, 1)]
    assert items[0]["metadata"] == {
        "name": "w0",
        "namespace": "ns",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "j", "uid": "u"}],
    }
    assert items[0]["priority"] == 10 and items[0]["localQueueName"] == "a"
    assert names(summary.in_cluster_queue(ORDER, Page(limit=2, offset=3))) == [("w3", 3, 1), ("w4", 4, 1)]
    assert summary.in_cluster_queue(ORDER, Page(limit=0)) == []


def test_a_local_queue_page_is_its_part_of_the_cluster_queue_order() -> None:
    assert names(summary.in_local_queue(ORDER, "ns", "a", Page())) == [("w0", 0, 0), ("w3", 3, 1)]
    assert names(summary.in_local_queue(ORDER, "ns", "a", Page(offset=1))) == [("w3", 3, 1)]
    assert names(summary.in_local_queue(ORDER, "ns", "b", Page(limit=1))) == [("w1", 1, 0)]
    assert summary.in_local_queue(ORDER, "ns", "missing", Page()) == []


def test_limit_and_offset_are_bounded_as_kueue_bounds_them_and_garbage_named() -> None:
    assert summary.page_of({}) == Page(1000, 0)
    assert summary.page_of({"limit": "-3", "offset": "-1"}) == Page(0, 0)
    assert summary.page_of({"limit": "1000000", "offset": "7"}) == Page(100_000, 7)
    with pytest.raises(summary.BadQuery, match="limit='ten' is not an integer"):
        summary.page_of({"limit": "ten"})


def test_the_group_is_kueues_in_kueue_api_mode_and_rayquotas_otherwise() -> None:
    kueue = discovery.of_mode("kueue")
    assert (kueue.name, kueue.versions) == ("visibility.kueue.x-k8s.io", ("v1beta2", "v1beta1"))
    assert kueue.apiservice_name("v1beta2") == "v1beta2.visibility.kueue.x-k8s.io"
    own = discovery.of_mode("rayquota")
    assert (own.name, own.versions) == ("visibility.rayquota.io", ("v1alpha1",))
    listed = discovery.resource_list(kueue, "v1beta1")
    assert listed["groupVersion"] == "visibility.kueue.x-k8s.io/v1beta1"
    verbs = {r["name"]: (r["namespaced"], r["verbs"]) for r in listed["resources"]}
    assert verbs == {
        "clusterqueues": (False, []),
        "clusterqueues/pendingworkloads": (False, ["get"]),
        "localqueues": (True, []),
        "localqueues/pendingworkloads": (True, ["get"]),
    }
    assert discovery.api_group(kueue)["preferredVersion"]["version"] == "v1beta2"


def test_the_user_is_read_from_the_headers_the_api_server_names() -> None:
    front = front_proxy_of(
        {
            "data": {
                "requestheader-client-ca-file": "PEM",
                "requestheader-allowed-names": '["front-proxy-client"]',
                "requestheader-username-headers": '["X-Remote-User"]',
                "requestheader-group-headers": '["X-Remote-Group"]',
                "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
            }
        }
    )
    assert front.trusts("front-proxy-client") and not front.trusts("someone-else") and not front.trusts(None)
    headers = CIMultiDict(
        [
            ("x-remote-user", "alice"),
            ("X-Remote-Group", "team"),
            ("X-Remote-Group", "system:authenticated"),
            ("X-Remote-Extra-Scopes", "a"),
        ]
    )
    user = user_of(CIMultiDictProxy(headers), front)
    assert user is not None
    assert (user.name, user.groups, dict(user.extra)) == (
        "alice",
        ("team", "system:authenticated"),
        {"scopes": ("a",)},
    )
    assert user_of(CIMultiDictProxy(CIMultiDict()), front) is None
    assert FrontProxy("PEM").trusts("anyone")  # no allowed names: any name the CA signed
    with pytest.raises(LookupError, match="requestheader-client-ca-file"):
        front_proxy_of({"data": {}})


def test_the_access_review_asks_for_the_subresource() -> None:
    asked = resource_attributes(
        "visibility.rayquota.io", "v1alpha1", "localqueues/pendingworkloads", "lq", "ns"
    )
    assert asked == {
        "verb": "get",
        "group": "visibility.rayquota.io",
        "version": "v1alpha1",
        "resource": "localqueues",
        "subresource": "pendingworkloads",
        "name": "lq",
        "namespace": "ns",
    }
