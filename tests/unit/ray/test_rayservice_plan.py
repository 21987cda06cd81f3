"""What a RayService spec change triggers, on a table of changes, and the cluster moves of an
upgrade (NewCluster, incremental, None, rollbacks)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from rayquota.operator.ray.rayservice.cluster import build_cluster, updated_cluster
from rayquota.operator.ray.rayservice.plan import (
    ClusterChange,
    ClusterStep,
    ServiceView,
    classify_change,
    cluster_config,
    decide_clusters,
    leftovers,
)
from rayquota.operator.ray.vocabulary import labels
from tests.unit.ray.rayservice_fixtures import OPERATOR_VERSION, child_of, service

Edit = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Edit:
    def edit(config: dict[str, Any]) -> None:
        target: Any = config
        keys = path.split(".")
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target[key]
        target[keys[-1]] = value

    return edit


def _append_group(config: dict[str, Any]) -> None:
    extra = copy.deepcopy(config["workerGroupSpecs"][0])
    extra["groupName"] = "cpu"
    config["workerGroupSpecs"].append(extra)


def _prepend_group(config: dict[str, Any]) -> None:
    extra = copy.deepcopy(config["workerGroupSpecs"][0])
    extra["groupName"] = "cpu"
    config["workerGroupSpecs"].insert(0, extra)


def _remove_group(config: dict[str, Any]) -> None:
    config["workerGroupSpecs"] = []


HEAD = "headGroupSpec.template.spec.containers.0"
WORKER = "workerGroupSpecs.0"

CHANGES: list[tuple[str, Edit | None, ClusterChange]] = [
    ("nothing", None, ClusterChange.SAME),
    ("worker replicas", _set(f"{WORKER}.replicas", 3), ClusterChange.SCALE_IN_PLACE),
    ("worker min/max", _set(f"{WORKER}.maxReplicas", 8), ClusterChange.SCALE_IN_PLACE),
    ("workersToDelete", _set(f"{WORKER}.scaleStrategy", {"workersToDelete": ["p"]}), ClusterChange.SAME),
    ("nested suspend gate", _set("suspend", True), ClusterChange.SAME),
    ("placement injected by a queue", _set(f"{WORKER}.template.spec.nodeSelector", {"pool": "h100"}),
     ClusterChange.SAME),
    ("worker group appended", _append_group, ClusterChange.APPEND_WORKER_GROUPS),
    ("worker group prepended", _prepend_group, ClusterChange.NEW_CLUSTER),
    ("worker group removed", _remove_group, ClusterChange.NEW_CLUSTER),
    ("head image", _set(f"{HEAD}.image", "rayproject/ray:2.42.0"), ClusterChange.NEW_CLUSTER),
    ("worker resources", _set(f"{WORKER}.template.spec.containers.0.resources", {"limits": {"cpu": "2"}}),
     ClusterChange.NEW_CLUSTER),
    ("numOfHosts", _set(f"{WORKER}.numOfHosts", 2), ClusterChange.NEW_CLUSTER),
    ("rayStartParams", _set("headGroupSpec.rayStartParams", {"num-cpus": "0"}), ClusterChange.NEW_CLUSTER),
    ("rayVersion", _set("rayVersion", "2.42.0"), ClusterChange.NEW_CLUSTER),
]  # fmt: skip


@pytest.mark.parametrize(("what", "edit", "expected"), CHANGES, ids=[c[0] for c in CHANGES])
def test_what_a_cluster_config_change_triggers(what: str, edit: Edit | None, expected: ClusterChange) -> None:
    child = child_of(service())
    assert classify_change(cluster_config(service(edit)), child, OPERATOR_VERSION) == expected


def test_autoscaled_clusters_are_not_scaled_in_place() -> None:
    child = child_of(service(_set("enableInTreeAutoscaling", True)))
    goal = cluster_config(
        service(lambda c: (_set("enableInTreeAutoscaling", True)(c), _set(f"{WORKER}.replicas", 4)(c)))
    )
    assert classify_change(goal, child, OPERATOR_VERSION) == ClusterChange.SAME


def test_an_operator_upgrade_restamps_and_never_prepares_a_new_cluster() -> None:
    svc = service()
    child = child_of(svc)
    # Written by an older operator whose hash function differed.
    child["metadata"]["annotations"][labels.OPERATOR_VERSION_ANNOTATION] = "old"
    child["metadata"]["annotations"][labels.HASH_ANNOTATION] = "a-hash-of-another-algorithm"
    view = ServiceView(svc, active=child, pending=None, pending_name="", rolling_back=False,
                       operator_version=OPERATOR_VERSION)  # fmt: skip
    decision = decide_clusters(view)
    assert (decision.step, decision.change) == (ClusterStep.UPDATE_ACTIVE, ClusterChange.RESTAMP)
    restamped = updated_cluster(child, svc, decision.change, OPERATOR_VERSION)
    assert restamped["spec"] == child["spec"]
    assert restamped["metadata"]["annotations"][labels.OPERATOR_VERSION_ANNOTATION] == OPERATOR_VERSION
    # ... while a real change under an old stamp is still an upgrade.
    changed = service(_set(f"{HEAD}.image", "rayproject/ray:2.42.0"))
    view = ServiceView(changed, active=child, pending=None, pending_name="", rolling_back=False,
                       operator_version=OPERATOR_VERSION)  # fmt: skip
    assert decide_clusters(view).step == ClusterStep.PREPARE_PENDING


NEW_IMAGE = _set(f"{HEAD}.image", "rayproject/ray:2.42.0")
THIRD_IMAGE = _set(f"{HEAD}.image", "rayproject/ray:2.43.0")


def view_of(
    goal: dict[str, Any], *, active: dict[str, Any] | None, pending: dict[str, Any] | None,
    pending_name: str | None = None, rolling_back: bool = False,
) -> ServiceView:  # fmt: skip
    if pending_name is None:
        pending_name = pending["metadata"]["name"] if pending else ""
    return ServiceView(goal, active, pending, pending_name, rolling_back, OPERATOR_VERSION)


@pytest.mark.parametrize(
    ("upgrade", "goal_edit", "has_pending", "pending_edit", "rolling_back", "expected"),
    [
        # (strategy, goal, is there a pending cluster, its config, rolling back) -> the move
        ("NewCluster", None, False, None, False, ClusterStep.NOTHING),
        ("NewCluster", NEW_IMAGE, False, None, False, ClusterStep.PREPARE_PENDING),
        (None, NEW_IMAGE, False, None, False, ClusterStep.PREPARE_PENDING),  # NewCluster is the default
        ("None", NEW_IMAGE, False, None, False, ClusterStep.REPORT_UPGRADE_DISABLED),
        ("NewClusterWithIncrementalUpgrade", NEW_IMAGE, False, None, False, ClusterStep.PREPARE_PENDING),
        ("NewCluster", NEW_IMAGE, True, NEW_IMAGE, False, ClusterStep.NOTHING),  # upgrade under way
        ("NewCluster", None, True, NEW_IMAGE, False, ClusterStep.DROP_PENDING),  # reverted
        ("NewCluster", THIRD_IMAGE, True, NEW_IMAGE, False, ClusterStep.REPLACE_PENDING),
        ("NewClusterWithIncrementalUpgrade", None, True, NEW_IMAGE, False, ClusterStep.START_ROLLBACK),
        ("NewClusterWithIncrementalUpgrade", THIRD_IMAGE, True, NEW_IMAGE, False, ClusterStep.START_ROLLBACK),
        ("NewClusterWithIncrementalUpgrade", None, True, NEW_IMAGE, True, ClusterStep.NOTHING),
        ("NewClusterWithIncrementalUpgrade", NEW_IMAGE, True, NEW_IMAGE, True, ClusterStep.CANCEL_ROLLBACK),
        ("NewCluster", _append_group, False, None, False, ClusterStep.UPDATE_ACTIVE),
        ("None", _set(f"{WORKER}.replicas", 5), False, None, False, ClusterStep.UPDATE_ACTIVE),
    ],
)
def test_cluster_moves(
    upgrade: str | None, goal_edit: Edit | None, has_pending: bool, pending_edit: Edit | None,
    rolling_back: bool, expected: ClusterStep,
) -> None:  # fmt: skip
    active = child_of(service(upgrade=upgrade), "svc-old01")
    pending = child_of(service(pending_edit, upgrade=upgrade), "svc-new01") if has_pending else None
    goal = service(goal_edit, upgrade=upgrade)
    assert (
        decide_clusters(view_of(goal, active=active, pending=pending, rolling_back=rolling_back)).step
        == expected
    )


def test_appended_groups_update_the_pending_cluster_in_place() -> None:
    active = child_of(service(), "svc-old01")
    pending = child_of(service(NEW_IMAGE), "svc-new01")
    goal = service(lambda c: (NEW_IMAGE(c), _append_group(c)))
    decision = decide_clusters(view_of(goal, active=active, pending=pending))
    assert (decision.step, decision.change) == (
        ClusterStep.UPDATE_PENDING,
        ClusterChange.APPEND_WORKER_GROUPS,
    )


def test_first_cluster_is_recorded_then_created() -> None:
    svc = service()
    assert decide_clusters(view_of(svc, active=None, pending=None)).step == ClusterStep.PREPARE_PENDING
    recorded = view_of(svc, active=None, pending=None, pending_name="svc-abcde")
    assert decide_clusters(recorded).step == ClusterStep.CREATE_PENDING


def test_a_first_cluster_whose_config_changes_before_it_serves_is_replaced() -> None:
    pending = child_of(service(), "svc-first")
    assert decide_clusters(view_of(service(NEW_IMAGE), active=None, pending=pending)).step == (
        ClusterStep.REPLACE_PENDING
    )


# ---------------------------------------------------------------------------------------------------
# The children themselves


def test_a_child_carries_the_gate_labels_and_hash_of_its_service() -> None:
    svc = service(_set("suspend", True))
    child = build_cluster(svc, "svc-abcde", OPERATOR_VERSION, autoscale_from_min=False)
    assert child["spec"]["suspend"] is True  # the queue's gate is copied at creation
    assert child["metadata"]["labels"] == {
        "rayquota.io/queue-name": "team-a",
        labels.ORIGINATED_FROM_CR_NAME: "svc",
        labels.ORIGINATED_FROM_CRD: "RayService",
    }
    annotations = child["metadata"]["annotations"]
    assert annotations[labels.NUM_WORKER_GROUPS_ANNOTATION] == "1"
    assert child["metadata"]["ownerReferences"][0]["uid"] == "svc-uid"
    assert child["metadata"]["ownerReferences"][0]["controller"] is True


def test_an_incremental_pending_cluster_starts_without_replicas() -> None:
    child = build_cluster(service(), "svc-abcde", OPERATOR_VERSION, autoscale_from_min=True)
    assert "replicas" not in child["spec"]["workerGroupSpecs"][0]
    assert child["spec"]["workerGroupSpecs"][0]["minReplicas"] == 1


def test_in_place_updates_never_touch_the_gate_or_the_queues_placement() -> None:
    child = child_of(service(_set("suspend", True)))
    group = child["spec"]["workerGroupSpecs"][0]
    group["template"]["spec"]["nodeSelector"] = {"rayquota.io/gpu-pool": "h100"}
    # The user's spec says suspend: false now; only the queue may lift the child's gate.
    goal = service(lambda c: (_set("suspend", False)(c), _set(f"{WORKER}.replicas", 4)(c), _append_group(c)))
    scaled = updated_cluster(child, goal, ClusterChange.SCALE_IN_PLACE, OPERATOR_VERSION)
    assert scaled["spec"]["suspend"] is True
    assert scaled["spec"]["workerGroupSpecs"][0]["replicas"] == 4
    assert scaled["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] == {
        "rayquota.io/gpu-pool": "h100"
    }
    appended = updated_cluster(child, goal, ClusterChange.APPEND_WORKER_GROUPS, OPERATOR_VERSION)
    assert appended["spec"]["suspend"] is True
    assert [g["groupName"] for g in appended["spec"]["workerGroupSpecs"]] == ["gpu", "cpu"]
    assert appended["metadata"]["annotations"][labels.NUM_WORKER_GROUPS_ANNOTATION] == "2"


def test_leftover_clusters_are_stamped_then_deleted_when_due() -> None:
    def named(name: str, delete_after: float | None = None) -> dict[str, Any]:
        annotations = {} if delete_after is None else {labels.DELETE_AFTER_ANNOTATION: str(delete_after)}
        return {"metadata": {"name": name, "annotations": annotations}}

    clusters = [named("svc-active"), named("svc-pending"), named("svc-old"), named("svc-older", 100.0),
                named("svc-oldest", 50.0)]  # fmt: skip
    due, to_stamp = leftovers(
        clusters, active_name="svc-active", pending_name="svc-pending",
        delete_after_annotation=labels.DELETE_AFTER_ANNOTATION, now=60.0, delay_s=30,
    )  # fmt: skip
    assert due == ["svc-oldest"]
    assert [(x.name, x.delete_at) for x in to_stamp] == [("svc-old", 90.0)]
