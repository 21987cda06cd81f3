"""The NetworkPolicies of ``spec.networkPolicy``, as KubeRay v1.7.0 builds them (the parts the
integration test cannot reach: a K8sJobMode RayJob's submitter, the dashboard port, the gate)."""

from __future__ import annotations

from typing import Any

from rayquota.operator.feature_gates import FeatureGates
from rayquota.operator.ray.builders.networkpolicy import comparable, wanted_policies
from rayquota.operator.ray.raycluster.plan import validate_cluster
from rayquota.operator.ray.raycluster.security_fields import allowed_fields
from tests.unit.ray.fixtures import cluster


def job_cluster(**labels: str) -> dict[str, Any]:
    body = cluster(networkPolicy={"mode": "DenyAllIngress"})
    body["metadata"]["uid"] = "c1"
    body["metadata"]["labels"] = labels
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "job", "uid": "j1", "controller": True}
    ]
    body["spec"]["headGroupSpec"]["rayStartParams"] = {"dashboard-port": "9000"}
    return body


def test_a_k8sjobmode_rayjobs_submitter_may_reach_the_dashboard_port() -> None:
    head, *workers = wanted_policies(job_cluster(**{"ray.io/job-submission-mode": "K8sJobMode"}))
    submitter = {
        "from": [
            {
                "podSelector": {
                    "matchLabels": {
                        "ray.io/originated-from-cr-name": "job",
                        "ray.io/originated-from-crd": "RayJob",
                    }
                }
            }
        ],
        "ports": [{"protocol": "TCP", "port": 9000}],
    }
    assert head["spec"]["ingress"][1] == submitter
    assert head["spec"]["policyTypes"] == ["Ingress"] and "egress" not in head["spec"]
    assert all(len(w["spec"]["ingress"]) == 1 for w in workers)  # workers: the same cluster only


def test_other_submission_modes_get_no_submitter_rule() -> None:
    head, *_ = wanted_policies(job_cluster(**{"ray.io/job-submission-mode": "HTTPMode"}))
    assert len(head["spec"]["ingress"]) == 1


def test_no_policies_without_the_field_and_ports_compare_as_stored() -> None:
    assert wanted_policies(cluster()) == []
    with_port = {"ingress": [{"ports": [{"port": 80}]}], "egress": []}
    assert comparable(with_port) == {"ingress": [{"ports": [{"port": 80, "protocol": "TCP"}]}]}


def test_the_field_is_refused_unless_the_gate_is_on() -> None:
    body = cluster(networkPolicy={})
    [error] = validate_cluster(body)
    assert error.startswith(
        "spec.networkPolicy is refused (set to {}): the RayClusterNetworkPolicy feature gate is off"
    )
    on = allowed_fields(FeatureGates.parse("RayClusterNetworkPolicy=true").enabled)
    assert validate_cluster(body, on) == []
    assert validate_cluster(cluster(tlsOptions={"enabled": True}), on) != []  # only its own field
