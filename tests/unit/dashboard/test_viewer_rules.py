"""The dashboard viewer's ClusterRole: read access to every quota object the pages show, in the
queue API's group of each mode, and nothing it could change."""

from __future__ import annotations

import pytest

from rayquota.dashboard.viewer_rbac import viewer_rules
from rayquota.operator.queue.kueue.api_group import KUEUE, RAYQUOTA, QueueApi

QUOTA_OBJECTS = {
    "resourceflavors",
    "cohorts",
    "clusterqueues",
    "localqueues",
    "workloads",
    "workloadpriorityclasses",
}


@pytest.mark.parametrize("api", [RAYQUOTA, KUEUE], ids=["rayquota", "kueue"])
def test_the_viewer_reads_every_quota_object_of_its_group(api: QueueApi) -> None:
    rules = viewer_rules(api)
    group = api.workloads.group
    readable = {plural for rule in rules if rule["apiGroups"] == [group] for plural in rule["resources"]}
    assert readable >= QUOTA_OBJECTS
    assert {"pods", "events", "namespaces"} <= {
        p for r in rules if r["apiGroups"] == [""] for p in r["resources"]
    }
    assert all(rule["verbs"] == ["get", "list", "watch"] for rule in rules)
