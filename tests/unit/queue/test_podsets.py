from __future__ import annotations

import copy
import json
from typing import Any

from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters.ray_kind import group_key_of_pod
from rayquota.operator.queue.adapters.raycluster import RayClusterAdapter, raycluster_demand
from rayquota.operator.queue.adapters.rayjob import rayjob_demand
from rayquota.operator.queue.adapters.rayservice import rayservice_demand
from rayquota.operator.queue.demand import podsets
from rayquota.operator.queue.demand.podsets import Role
from rayquota.operator.queue.gating.coverage import allocate
from rayquota.operator.ray.builders import pod_resources
from tests.unit.queue import bodies

GI = 2**30 * 1000


def by_name(demand: podsets.Demand) -> dict[str, podsets.PodSetDemand]:
    return {ps.name: ps for ps in demand.pod_sets}


def test_pod_requests_use_request_else_limit_init_peak_and_overhead() -> None:
    spec = {
        "containers": [
            {"resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}}},
            {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        ],
        "initContainers": [{"resources": {"requests": {"cpu": "4"}}}],
        "overhead": {"memory": "1Gi"},
    }
    assert pod_resources.pod_requests(spec) == {"cpu": 4000, "nvidia.com/gpu": 1000, "memory": 2 * GI}


def test_a_small_worker_is_counted_with_the_wait_for_gcs_container_the_builder_adds() -> None:
    """The pod builder gives every worker an init container of 200m CPU / 256Mi: a worker asking
    for less reserves that much, and its pod set says so (the quota matches the pods)."""
    group = bodies.gpu_worker_group()
    group["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    demand = raycluster_demand({"metadata": {"name": "c"}, "spec": bodies.cluster_spec(group)})
    assert by_name(demand)["gpu"].requests == {"cpu": 200, "memory": 256 * 2**20 * 1000}


def test_raycluster_head_and_workers_replicas_times_hosts() -> None:
    cluster = bodies.raycluster()
    cluster["spec"] = bodies.cluster_spec(bodies.gpu_worker_group("gpu", replicas=3, hosts=2))
    demand = raycluster_demand(cluster)
    sets = by_name(demand)
    assert sets["head"].count == 1 and sets["head"].role is Role.HEAD
    assert sets["gpu"].count == 6 and sets["gpu"].requests["nvidia.com/gpu"] == 1000
    assert podsets.resource_totals(demand.pod_sets)["nvidia.com/gpu"] == 6000
    assert demand.parts == {"demo": {"head": 1, "gpu": 6}}


def test_suspended_worker_group_asks_for_nothing() -> None:
    group = bodies.gpu_worker_group()
    group["suspend"] = True
    cluster = bodies.raycluster()
    cluster["spec"] = bodies.cluster_spec(group)
    assert by_name(raycluster_demand(cluster))["gpu"].count == 0


def test_autoscaling_adds_the_autoscaler_sidecar_to_the_head() -> None:
    plain = by_name(rayjob_demand(bodies.rayjob(mode="HTTPMode")))["head"]
    scaled = by_name(
        rayjob_demand(bodies.rayjob(mode="HTTPMode", spec=bodies.cluster_spec(autoscaling=True)))
    )
    # The autoscaler's default: 500m CPU and 512Mi on top of the head container.
    assert scaled["head"].requests["cpu"] == plain.requests["cpu"] + 500
    assert scaled["head"].requests["memory"] == plain.requests["memory"] + GI // 2


def test_k8s_job_mode_adds_the_default_submitter_pod() -> None:
    sets = by_name(rayjob_demand(bodies.rayjob()))
    assert set(sets) == {"head", "gpu", "submitter"}
    assert sets["submitter"].count == 1 and sets["submitter"].requests == {
        "cpu": 500,
        "memory": 200 * 2**20 * 1000,
    }


def test_k8s_job_mode_submitter_from_its_template() -> None:
    job = bodies.rayjob()
    job["spec"]["submitterPodTemplate"] = {
        "spec": {"containers": [{"name": "s", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]}
    }
    assert by_name(rayjob_demand(job))["submitter"].requests == {"cpu": 2000, "memory": GI}


def test_sidecar_mode_puts_the_submitter_in_the_head_and_has_no_submitter_pod() -> None:
    http = by_name(rayjob_demand(bodies.rayjob(mode="HTTPMode")))
    sidecar = by_name(rayjob_demand(bodies.rayjob(mode="SidecarMode")))
    assert "submitter" not in sidecar and "submitter" not in http
    # The sidecar submitter requests what KubeRay's default submitter container does: 500m.
    assert sidecar["head"].requests["cpu"] == http["head"].requests["cpu"] + 500


def test_cluster_selector_job_asks_only_for_its_submitter() -> None:
    job = bodies.rayjob()
    job["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    assert set(by_name(rayjob_demand(job))) == {"submitter"}


def test_worker_group_named_head_does_not_merge_with_the_head() -> None:
    cluster = bodies.raycluster()
    cluster["spec"] = bodies.cluster_spec(bodies.gpu_worker_group("head"))
    names = [ps.name for ps in raycluster_demand(cluster).pod_sets]
    assert len(set(names)) == 2 and names[0] == "head"


def test_rayservice_before_children_uses_the_cluster_config() -> None:
    demand = rayservice_demand(bodies.rayservice(), [])
    assert podsets.resource_totals(demand.pod_sets)["nvidia.com/gpu"] == 2000
    assert list(demand.parts) == ["svc"]


def test_rayservice_sums_children_with_exact_totals_per_shape() -> None:
    """Kueue PR 11264's first hole: same group name, different shapes, counted exactly."""
    service = bodies.rayservice()
    old = bodies.child_cluster(
        service, "svc-old", bodies.cluster_spec(bodies.gpu_worker_group("gpu", 2, gpus=1))
    )
    new = bodies.child_cluster(
        service, "svc-new", bodies.cluster_spec(bodies.gpu_worker_group("gpu", 3, gpus=2))
    )
    demand = rayservice_demand(service, [old, new])
    totals = podsets.resource_totals(demand.pod_sets)
    assert totals["nvidia.com/gpu"] == 2 * 1000 + 3 * 2000
    gpu_sets = [ps for ps in demand.pod_sets if ps.role is Role.WORKER]
    assert sorted((ps.count, ps.requests["nvidia.com/gpu"]) for ps in gpu_sets) == [(2, 1000), (3, 2000)]
    # Both heads have one shape: merged into one pod set of two pods.
    heads = [ps for ps in demand.pod_sets if ps.role is Role.HEAD]
    assert len(heads) == 1 and heads[0].count == 2
    assert sum(demand.parts["svc-new"].values()) == 4 and list(demand.parts) == ["svc-old", "svc-new"]


def test_rayservice_pod_set_names_are_stable_when_the_old_child_goes() -> None:
    service = bodies.rayservice()
    old = bodies.child_cluster(
        service, "svc-old", bodies.cluster_spec(bodies.gpu_worker_group("gpu", 2, gpus=1))
    )
    new = bodies.child_cluster(
        service, "svc-new", bodies.cluster_spec(bodies.gpu_worker_group("gpu", 3, gpus=2))
    )
    both = rayservice_demand(service, [old, new])
    alone = rayservice_demand(service, [new])
    assert set(alone.counts()) <= set(both.counts())


def test_injected_placement_does_not_change_the_shape() -> None:
    group = bodies.gpu_worker_group()
    before = podsets.cluster_pod_sets(bodies.cluster_spec(group))[1][1]
    injected = copy.deepcopy(group)
    template = injected["template"]
    template["spec"]["nodeSelector"] = {"pool": "h100"}
    template["metadata"] = {
        "annotations": {
            naming.INJECTED_ANNOTATION: json.dumps({"nodeSelector": {"pool": "h100"}, "tolerations": []})
        }
    }
    after = podsets.cluster_pod_sets(bodies.cluster_spec(injected))[1][1]
    assert podsets.shape_key(before) == podsets.shape_key(after)


def test_held_demand_keeps_quota_until_surplus_pods_are_gone() -> None:
    cluster = bodies.raycluster()
    cluster["spec"] = bodies.cluster_spec(bodies.gpu_worker_group("gpu", replicas=1))
    demand = raycluster_demand(cluster)
    pods = [bodies.pod("demo", "head"), *[bodies.pod("demo", "worker", "gpu") for _ in range(3)]]
    pods.append(bodies.pod("demo", "worker", "gpu", phase="Succeeded"))
    live = podsets.live_pods_per_pod_set(demand, {"demo": pods}, RayClusterAdapter().group_of_pod)
    assert live == {"head": 1, "gpu": 3}
    held = {ps.name: ps.count for ps in podsets.held_demand(demand, live)}
    assert held == {"head": 1, "gpu": 3}
    assert {ps.name: ps.count for ps in podsets.held_demand(demand, {"gpu": 0})} == {"head": 1, "gpu": 1}


Body = dict[str, Any]


def _service_with_groups(gpus_old: int, gpus_new: int, groups: int = 4) -> tuple[Body, Body, Body]:
    """A RayService mid-upgrade: old and new child, each with ``groups`` worker groups."""
    service = bodies.rayservice()

    def spec(gpus: int) -> Body:
        return bodies.cluster_spec(
            *(bodies.gpu_worker_group(f"g{i}", 1, gpus=gpus + i) for i in range(groups))
        )

    old = bodies.child_cluster(service, "svc-old", spec(gpus_old))
    new = bodies.child_cluster(service, "svc-new", spec(gpus_new))
    return service, old, new


def test_an_upgrade_with_the_same_shapes_stays_within_the_pod_set_limit() -> None:
    service, old, new = _service_with_groups(1, 1)
    demand = rayservice_demand(service, [old, new])
    assert len(demand.pod_sets) == 5  # one head, four worker shapes: both children share them
    assert podsets.too_many_pod_sets("RayService", service, demand) is None


def test_too_many_pod_sets_names_the_object_and_the_count() -> None:
    # Every worker shape changes: 1 head + 18 workers, one more than Kueue's 18 pod sets.
    service, old, new = _service_with_groups(1, 10, groups=9)
    demand = rayservice_demand(service, [old, new])
    assert len(demand.pod_sets) == 19
    message = podsets.too_many_pod_sets("RayService", service, demand)
    assert message is not None
    assert "RayService team-a/svc needs 19 pod sets" in message and "at most 18" in message
    assert "svc-old (10)" in message and "svc-new (10)" in message
    # Alone, each child fits.
    assert podsets.too_many_pod_sets("RayService", service, rayservice_demand(service, [new])) is None


def test_refused_upgrade_keeps_the_active_child_covered_and_the_new_one_gated() -> None:
    """While refused, the Workload keeps the old child's admission: it still covers the child
    that serves (same pod set names), never the new one."""
    service, old, new = _service_with_groups(1, 5)
    admitted = rayservice_demand(service, [old]).counts()
    demand = rayservice_demand(service, [old, new])
    shares = allocate(demand, admitted, running={"svc-old"})
    assert shares["svc-old"].runs and shares["svc-old"].pods == dict(demand.parts["svc-old"])
    assert not shares["svc-new"].runs


def small_head(cluster_spec: dict[str, Any]) -> dict[str, Any]:
    head = cluster_spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["resources"] = {"requests": {"cpu": "100m", "memory": "1Gi"}}
    return cluster_spec


def test_the_head_covers_the_redis_cleanup_pod_when_gcs_ft_uses_redis() -> None:
    """The cleanup Job's pod (200m / 256Mi) runs in the head's place after it is gone: the head
    pod set asks for the larger of each resource, as Kueue counts it."""
    spec = small_head(bodies.cluster_spec(bodies.gpu_worker_group()))
    plain = by_name(raycluster_demand({"metadata": {"name": "c"}, "spec": copy.deepcopy(spec)}))["head"]
    assert plain.requests["cpu"] == 100
    spec["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    head = by_name(raycluster_demand({"metadata": {"name": "c"}, "spec": spec}))["head"]
    assert head.requests == {"cpu": 200, "memory": GI}


def test_the_older_ft_annotation_counts_the_cleanup_pod_too_and_rocksdb_does_not() -> None:
    spec = small_head(bodies.cluster_spec(bodies.gpu_worker_group()))
    annotations = {"ray.io/ft-enabled": "true"}
    annotated = {"metadata": {"name": "c", "annotations": annotations}, "spec": spec}
    assert by_name(raycluster_demand(annotated))["head"].requests["cpu"] == 200
    rayjob = bodies.rayjob(spec=copy.deepcopy(spec))
    rayjob["metadata"]["annotations"] = annotations
    assert by_name(rayjob_demand(rayjob))["head"].requests["cpu"] == 200
    embedded = copy.deepcopy(spec)
    embedded["gcsFaultToleranceOptions"] = {"backend": "rocksdb"}
    head = by_name(raycluster_demand({"metadata": {"name": "c"}, "spec": embedded}))["head"]
    assert head.requests["cpu"] == 100


def test_the_redis_cleanup_pod_counts_as_its_clusters_head() -> None:
    assert group_key_of_pod(bodies.pod("c", "redis-cleanup")) == (Role.HEAD, "")
    assert group_key_of_pod(bodies.pod("c", "worker", "headgroup")) == (Role.WORKER, "headgroup")
