from __future__ import annotations

import copy
from typing import Any

from rayquota.operator.queue import naming
from rayquota.operator.queue.gating.gate import QueueGate
from rayquota.operator.queue.objects import QueueObjects, workload_key
from rayquota.operator.webhooks import review
from rayquota.operator.webhooks.configurations import webhook_configurations
from tests.unit.queue import bodies
from tests.unit.queue.fakes import FakeInformer, fake_pod_informers


def objects(workloads: list[dict[str, Any]] | None = None) -> QueueObjects:
    kinds = {k: FakeInformer() for k in ("RayCluster", "RayJob", "RayService")}
    return QueueObjects(naming.QueueSettings(), kinds, FakeInformer(workloads), fake_pod_informers())  # type: ignore[arg-type]


def test_queued_objects_are_born_suspended_and_others_untouched() -> None:
    job = bodies.rayjob()
    job["spec"]["suspend"] = False
    verdict = review.mutate("RayJob", job, objects())
    assert verdict.patch == ({"op": "add", "path": "/spec/suspend", "value": True},)
    service = bodies.rayservice()
    service["metadata"]["labels"] = {naming.QUEUE_LABEL: "q"}
    assert (
        review.mutate("RayService", service, objects()).patch[0]["path"] == "/spec/rayClusterConfig/suspend"
    )
    plain = bodies.raycluster()
    assert review.mutate("RayCluster", plain, objects()).patch == ()


def test_a_queued_rayjob_that_would_keep_its_cluster_is_refused_naming_the_field() -> None:
    job = bodies.rayjob()
    job["spec"].pop("shutdownAfterJobFinishes", None)
    verdict = review.mutate("RayJob", job, objects())
    assert not verdict.allowed
    assert verdict.message.startswith("spec.shutdownAfterJobFinishes: unset: a RayJob in queue ")
    job["spec"]["shutdownAfterJobFinishes"] = False
    assert (
        "spec.shutdownAfterJobFinishes: false: a RayJob in queue team-a must set"
        in review.mutate("RayJob", job, objects()).message
    )
    job["spec"]["shutdownAfterJobFinishes"] = True
    assert review.mutate("RayJob", job, objects()).allowed
    job["metadata"]["labels"] = {}  # not queued: KubeRay's rules only
    job["spec"]["shutdownAfterJobFinishes"] = False
    assert review.mutate("RayJob", job, objects()).allowed


def test_clearing_the_gate_is_refused_until_the_workload_is_admitted() -> None:
    old = bodies.rayjob()
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = False
    store = objects()
    verdict = review.validate_gate("RayJob", new, old, store, QueueGate(store))
    assert not verdict.allowed and "not admitted" in verdict.message
    admitted = {
        "metadata": {"name": workload_key("RayJob", old).name, "namespace": "team-a"},
        "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": []}},
    }
    store = objects([admitted])
    assert review.validate_gate("RayJob", new, old, store, QueueGate(store)).allowed
    # Setting the gate is always allowed.
    assert review.validate_gate("RayJob", old, new, store, QueueGate(store)).allowed


def test_cluster_queue_semantics_name_the_field() -> None:
    cq = {
        "metadata": {"name": "q"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1}]},
                        {"name": "f", "resources": [{"name": "memory", "nominalQuota": 1}]},
                    ],
                },
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "g", "resources": [{"name": "cpu", "nominalQuota": 1}]}],
                },
            ]
        },
    }
    verdict = review.validate_cluster_queue(cq)
    assert not verdict.allowed
    assert "spec.resourceGroups[0].flavors[1].name" in verdict.message
    assert "spec.resourceGroups[0].flavors[1].resources" in verdict.message
    assert "spec.resourceGroups[1].coveredResources: cpu" in verdict.message
    good = {"metadata": {"name": "q"}, "spec": {"resourceGroups": [cq["spec"]["resourceGroups"][1]]}}
    assert review.validate_cluster_queue(good).allowed


def test_configurations_never_block_a_down_operator_and_select_queued_objects() -> None:
    mutating, validating = webhook_configurations(
        "https://127.0.0.1:1", "Q0E=", (naming.QUEUE_LABEL, naming.KUEUE_QUEUE_LABEL)
    )
    hooks = [*mutating["webhooks"], *validating["webhooks"]]
    assert all(h["failurePolicy"] == "Ignore" for h in hooks)
    selected = [h["objectSelector"]["matchExpressions"][0]["key"] for h in mutating["webhooks"][:2]]
    assert selected == [naming.QUEUE_LABEL, naming.KUEUE_QUEUE_LABEL]
    assert {op for h in mutating["webhooks"][:2] for r in h["rules"] for op in r["operations"]} == {
        "CREATE",
        "UPDATE",
    }
    # ClusterQueues also go to a mutating webhook: it answers before the CRD schema does.
    assert mutating["webhooks"][2]["clientConfig"]["url"].endswith("/mutate-clusterqueue")


def test_cluster_queues_and_cohorts_go_to_their_checks_before_and_after_the_schema() -> None:
    """A Cohort's quota is checked as a ClusterQueue's: each kind's CREATE and UPDATE go to a
    mutating webhook (called before the CRD schema: a quota that is not a quantity is said in
    words) and to a validating one."""
    mutating, validating = webhook_configurations("https://127.0.0.1:1", "Q0E=", (naming.QUEUE_LABEL,))
    served: dict[tuple[str, str], set[str]] = {}
    for hook in [*mutating["webhooks"], *validating["webhooks"]]:
        for rule in hook["rules"]:
            for resource in rule["resources"]:
                if resource in ("clusterqueues", "cohorts"):
                    assert rule["apiGroups"] == ["rayquota.io"]
                    assert set(rule["operations"]) == {"CREATE", "UPDATE"}
                    path = hook["clientConfig"]["url"].removeprefix("https://127.0.0.1:1")
                    served.setdefault((resource, hook["failurePolicy"]), set()).add(path)
    assert served == {
        ("clusterqueues", "Ignore"): {"/mutate-clusterqueue", "/validate-clusterqueue"},
        ("cohorts", "Ignore"): {"/mutate-cohort", "/validate-cohort"},
    }


def test_a_cohort_whose_quota_is_not_a_quantity_is_refused_in_words() -> None:
    cohort = {
        "metadata": {"name": "research"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8 GPUs"}]}
                    ],
                }
            ]
        },
    }
    verdict = review.validate_cohort(cohort)
    assert not verdict.allowed
    assert verdict.message == (
        "invalid Cohort research: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "
        "invalid quantity '8 GPUs': not a Kubernetes quantity"
    )
    cohort["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "8"
    assert review.validate_cohort(cohort) == review.ALLOW
    # The ClusterQueue's other resource-group rules hold for a Cohort too (one check for both).
    cohort["spec"]["resourceGroups"][0]["flavors"].append(cohort["spec"]["resourceGroups"][0]["flavors"][0])
    assert "flavors[1].name: flavor a100 appears twice" in review.validate_cohort(cohort).message


def test_unreadable_topology_annotations_are_refused_naming_field_and_value() -> None:
    job = bodies.rayjob()
    group = job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    group["template"].setdefault("metadata", {})["annotations"] = {
        "kueue.x-k8s.io/podset-slice-required-topology": "topology.rayquota.io/rack",
        "kueue.x-k8s.io/podset-slice-size": "three",
    }
    verdict = review.mutate("RayJob", job, objects())
    assert not verdict.allowed
    assert (
        "spec.rayClusterSpec.workerGroupSpecs[0].template: annotation kueue.x-k8s.io/podset-slice-size: "
        in (verdict.message)
    )
    assert "'three' is not a positive integer" in verdict.message
    old = copy.deepcopy(job)
    group["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-slice-size"] = "2"
    assert review.mutate("RayJob", job, objects()).allowed
    store = objects()
    # an update to it too
    assert not review.validate_gate("RayJob", old, job, store, QueueGate(store)).allowed


def test_a_queued_object_whose_quantities_cannot_be_counted_is_refused_naming_field_and_value() -> None:
    """The CRDs check the grammar; what it lets through and the engine cannot count (an exponent
    beyond 10^64) is refused here, by field and value, on creation and on update. Found by the
    fuzz test (tests/integration/fuzz): such a RayJob made the queue's reconcile fail with a
    traceback on every retry."""
    job = bodies.rayjob()
    worker = job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    worker.setdefault("resources", {}).setdefault("requests", {})["cpu"] = "1e1000"
    verdict = review.mutate("RayJob", job, objects())
    assert not verdict.allowed
    field = "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers[0].resources.requests.cpu"
    assert f"{field}: invalid quantity '1e1000': exponent out of range" in verdict.message, verdict.message
    old = bodies.rayjob()
    store = objects()
    assert not review.validate_gate("RayJob", job, old, store, QueueGate(store)).allowed
    job["metadata"]["labels"] = {}  # not queued: the queue does not count it
    assert review.mutate("RayJob", job, objects()).allowed


def test_an_update_that_leaves_the_gate_out_keeps_it_and_an_explicit_false_is_judged() -> None:
    old = bodies.rayservice()
    old["metadata"]["labels"] = {naming.QUEUE_LABEL: "q"}
    old["spec"]["rayClusterConfig"]["suspend"] = True
    replaced = copy.deepcopy(old)
    del replaced["spec"]["rayClusterConfig"]["suspend"]  # the manifest as the user wrote it
    verdict = review.carry_gate_over("RayService", replaced, old, objects())
    assert verdict.allowed
    assert verdict.patch == ({"op": "add", "path": "/spec/rayClusterConfig/suspend", "value": True},)
    cleared = copy.deepcopy(old)
    cleared["spec"]["rayClusterConfig"]["suspend"] = False  # an explicit attempt: not mutated
    assert review.carry_gate_over("RayService", cleared, old, objects()).patch == ()
    store = objects()
    assert not review.validate_gate("RayService", cleared, old, store, QueueGate(store)).allowed
    # An admitted RayJob (gate lifted on the old object) is left as the update says.
    job = bodies.rayjob()
    job["spec"]["suspend"] = False
    assert review.carry_gate_over("RayJob", copy.deepcopy(job), job, objects()).patch == ()


def test_a_queue_label_naming_no_local_queue_is_warned_about_at_creation() -> None:
    job = bodies.rayjob()
    job["spec"]["suspend"] = False
    verdict = review.mutate("RayJob", job, objects(), queue_exists=False)
    assert verdict.allowed and verdict.patch
    assert verdict.warning is not None
    assert "LocalQueue team-a/team-a does not exist" in verdict.warning
    assert review.mutate("RayJob", job, objects()).warning == "suspended until its queue admits it"


def test_a_missing_required_field_is_named_by_its_path_as_the_schema_would() -> None:
    """The ClusterQueue check also runs as a mutating webhook, which answers before the CRD schema:
    a flavor without its name (a clean-clone fuzz run's case) must be refused naming
    spec.resourceGroups[0].flavors[1].name, as the schema's "Required value" did."""
    cq = {
        "metadata": {"name": "q"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1}]},
                        {"resources": [{"name": "cpu"}]},
                    ],
                }
            ]
        },
    }
    verdict = review.validate_cluster_queue(cq)
    assert not verdict.allowed
    assert "spec.resourceGroups[0].flavors[1].name: Required value" in verdict.message
    assert "spec.resourceGroups[0].flavors[1].resources[0].nominalQuota: Required value" in verdict.message


def test_a_status_is_not_held_to_what_the_schema_requires() -> None:
    """Beside KubeRay the status is KubeRay's: a condition our schema would require more of never
    makes the webhooks refuse the object (only the spec's required fields are named)."""
    from rayquota.operator.webhooks.shapes import type_errors

    body = {
        "metadata": {"name": "svc"},
        "spec": {},
        "status": {"conditions": [{"reason": "Initializing"}]},
    }
    assert not [e for e in type_errors("RayService", body) if e.startswith("status")]


def test_network_policy_is_accepted_with_its_feature_gate_on_and_refused_naming_the_field_when_off() -> None:
    """Issue 34: the reconciler builds spec.networkPolicy behind RayClusterNetworkPolicy; the
    webhooks accept it then (at creation and on an update), and refuse it otherwise, naming the
    field where it sits in each kind."""
    policy = {"ingressRules": []}
    cluster = bodies.raycluster(**{naming.QUEUE_LABEL: "q"})
    cluster["spec"]["networkPolicy"] = policy
    job = bodies.rayjob()
    job["spec"]["rayClusterSpec"]["networkPolicy"] = policy
    service = bodies.rayservice()
    service["metadata"]["labels"] = {naming.QUEUE_LABEL: "q"}
    service["spec"]["rayClusterConfig"]["networkPolicy"] = policy
    on = frozenset({"networkPolicy"})
    for kind, obj, path in (
        ("RayCluster", cluster, "spec.networkPolicy"),
        ("RayJob", job, "spec.rayClusterSpec.networkPolicy"),
        ("RayService", service, "spec.rayClusterConfig.networkPolicy"),
    ):
        off = review.mutate(kind, obj, objects())
        assert not off.allowed, kind
        shown = '{"ingressRules": []}'
        refused = f"{path} is refused (set to {shown}): the RayClusterNetworkPolicy feature gate is off"
        assert refused in off.message, off.message
        assert review.mutate(kind, obj, objects(), allowed=on).allowed, kind
        # An update adding it to a stored object: the same rule.
        old = copy.deepcopy(obj)
        old["spec"].get("rayClusterSpec", old["spec"].get("rayClusterConfig", old["spec"])).pop(
            "networkPolicy"
        )
        store = objects()
        refused = review.validate_gate(kind, obj, old, store, QueueGate(store))
        assert not refused.allowed and path in refused.message, kind
        assert review.validate_gate(kind, obj, old, store, QueueGate(store), allowed=on).allowed, kind
    # The gate turns on networkPolicy alone: mutual TLS stays refused.
    cluster["spec"]["tlsOptions"] = {"enabled": False}
    verdict = review.mutate("RayCluster", cluster, objects(), allowed=on)
    assert not verdict.allowed and "spec.tlsOptions is refused" in verdict.message
    assert "networkPolicy" not in verdict.message
