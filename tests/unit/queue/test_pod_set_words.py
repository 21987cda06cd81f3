"""Reasons name pod sets as their user knows them, never by internal names like ``gpu-50baf``."""

from __future__ import annotations

import re

from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.adapters.raycluster import raycluster_demand
from rayquota.operator.queue.adapters.rayjob import rayjob_demand
from rayquota.operator.queue.adapters.rayservice import rayservice_demand
from rayquota.operator.queue.demand.pod_set_words import annotation_value, in_words, pod_set_words, words_of
from rayquota.operator.queue.demand.podsets import Role
from tests.unit.queue import bodies

INTERNAL = re.compile(r"\b[a-z0-9-]+-[0-9a-f]{5}\b")


def test_a_rayservice_upgrade_names_each_cluster() -> None:
    service = bodies.rayservice("greeter")
    old = bodies.child_cluster(
        service, "greeter-old", bodies.cluster_spec(bodies.gpu_worker_group("gpu", 2, 1))
    )
    new = bodies.child_cluster(
        service, "greeter-new", bodies.cluster_spec(bodies.gpu_worker_group("gpu", 2, 2))
    )
    demand = rayservice_demand(service, [old, new])
    words = pod_set_words(ADAPTERS["RayService"], "greeter", demand, ["greeter-old", "greeter-new"])
    by_role = {ps.name: ps for ps in demand.pod_sets}
    assert set(words) == set(by_role)
    workers = sorted(words[ps.name] for ps in demand.pod_sets if ps.role is Role.WORKER)
    assert workers == [
        "worker group `gpu` of cluster `greeter-new`",
        "worker group `gpu` of cluster `greeter-old`",
    ]
    # Both heads have one shape, so one pod set: both clusters are named.
    (head,) = [words[ps.name] for ps in demand.pod_sets if ps.role is Role.HEAD]
    assert head == "the head of clusters `greeter-new` and `greeter-old`"


def test_a_rayservice_before_its_first_cluster_and_a_rayjob_are_named_after_the_object() -> None:
    service_demand = rayservice_demand(bodies.rayservice("greeter"), [])
    words = pod_set_words(ADAPTERS["RayService"], "greeter", service_demand, [])
    assert sorted(words.values()) == [
        "the head of RayService `greeter`",
        "worker group `gpu` of RayService `greeter`",
    ]
    job_words = pod_set_words(
        ADAPTERS["RayJob"], "first", rayjob_demand(bodies.rayjob("first")), ["first-x1"]
    )
    assert job_words == {
        "head": "the head of RayJob `first`",
        "gpu": "worker group `gpu` of RayJob `first`",
        "submitter": "the submitter of RayJob `first`",
    }
    cluster = bodies.raycluster("demo")
    cluster["spec"] = bodies.cluster_spec(bodies.gpu_worker_group("gpu"))
    assert pod_set_words(ADAPTERS["RayCluster"], "demo", raycluster_demand(cluster), [])["gpu"] == (
        "worker group `gpu` of cluster `demo`"
    )


def test_reasons_are_reworded_and_the_words_survive_the_annotation() -> None:
    words = {"gpu-50baf": "worker group `gpu` of cluster `greeter-zhkj3`", "head-1a2b3": "the head of ..."}
    reason = "pod set gpu-50baf: needs 8 nvidia.com/gpu in flavor a100; ClusterQueue gpu-8 has 0 of 8 free"
    stored = {"metadata": {"annotations": {"rayquota.io/pod-set-names": annotation_value(words)}}}
    worded = in_words(reason, words_of(stored))
    assert worded.startswith("worker group `gpu` of cluster `greeter-zhkj3`: needs 8 nvidia.com/gpu")
    assert not INTERNAL.search(worded.replace("greeter-zhkj3", ""))
    # Unknown names and Workloads without words are left as they are.
    assert in_words("pod set other-12345: needs 1", words) == "pod set other-12345: needs 1"
    assert words_of({"metadata": {"annotations": {"rayquota.io/pod-set-names": "{broken"}}}) == {}
    assert in_words(reason, {}) == reason
