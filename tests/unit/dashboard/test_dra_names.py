"""The Queue order and Cohorts pages show a DRA device-class quota by its mapped name
(``resources.deviceClassMappings``' ``name``), like any other resource."""

from __future__ import annotations

import json
from typing import Any

from rayquota.dashboard.queue_model import QueueModel
from rayquota.dashboard.views.cohorts import cohorts_page
from rayquota.dashboard.views.common import Page
from rayquota.dashboard.views.queue_order import QueueScope, queue_order_page

from .cache_fixture import GPU, cluster_queue, feed, flavor, local_queue, new_cache, workload

MAPPED = "example.com/mig-1g"
T0 = "2026-01-01T00:00:00Z"


def mapped(body: Any) -> Any:
    """The fixture's body with its quota resource named as a DeviceClass mapping names it."""
    return json.loads(json.dumps(body).replace(GPU, MAPPED))


def test_a_mapped_device_class_resource_shows_by_its_name() -> None:
    cache = new_cache()
    feed(cache.flavors, flavor())
    feed(cache.cluster_queues, mapped(cluster_queue("mig", 4, cohort="research")))
    feed(cache.local_queues, local_queue("ns", "q", "mig"))
    feed(
        cache.workloads,
        mapped(workload("ns", "running", "q", 3, created=T0, admitted_to="mig")),
        mapped(workload("ns", "waiting", "q", 2, created="2026-01-01T00:01:00Z")),
    )
    model = QueueModel(cache)
    page = queue_order_page(model.snapshot(), QueueScope("mig"), None, Page(), now=1767225900.0)
    (row,) = page["pending"]["items"]
    assert row["needs"] == f"{MAPPED} 2"
    assert row["reason"] == (
        f"needs 2 {MAPPED} in flavor a100; ClusterQueue mig has 1 of 4 free; cohort research can lend 0"
    )
    assert [h["holds"] for h in page["holders"]] == [f"{MAPPED} 3"]
    cohorts = cohorts_page(model.snapshot(), cache.cluster_queues.store.list())
    (queue,) = cohorts["clusterQueues"]
    (bar,) = queue["flavors"][0]["resources"]
    assert bar["resource"] == MAPPED
    assert (bar["usage"]["text"], bar["nominal"]["text"]) == ("3", "4")
