"""benchmarks/kuberay_network_policy.py's pure parts: what it applies, when it calls a side ready,
and the policy lines of its report."""

from __future__ import annotations

from typing import Any

from benchmarks import kuberay_network_policy as script
from rayquota.operator.ray.builders import networkpolicy


def _as_cluster(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": name, "namespace": script.NAMESPACE, "uid": f"uid-{name}"}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec}


def test_the_manifests_cover_every_mode_and_the_default_and_a_k8s_job_submitter() -> None:
    docs = script.manifests()
    modes = {(s.get("networkPolicy") or {}).get("mode") for s in script.cluster_specs(docs)}
    expected = {networkpolicy.DENY_ALL, networkpolicy.DENY_ALL_INGRESS, networkpolicy.DENY_ALL_EGRESS}
    assert modes == expected | {None}
    assert any(d["kind"] == "RayJob" and d["spec"]["submissionMode"] == "K8sJobMode" for d in docs)
    edited = {name for name, _ in script.EDITS}
    assert edited <= {d["metadata"]["name"] for d in docs if d["kind"] == "RayCluster"}


def test_the_expected_count_is_what_rayquotas_builder_makes_for_the_manifests() -> None:
    docs = script.manifests()
    made = sum(
        len(networkpolicy.wanted_policies(_as_cluster(f"c{i}", spec)))
        for i, spec in enumerate(script.cluster_specs(docs))
    )
    assert script.expected_policies(docs) == made == 15


def test_a_side_is_ready_only_with_both_job_clusters_and_every_policy() -> None:
    jobs = [
        {"kind": "RayJob", "metadata": {"name": n}, "status": {"rayClusterName": f"{n}-abcde"}}
        for n in ("npjob-k8s", "npjob-sidecar")
    ]
    policies = [{"kind": "NetworkPolicy", "metadata": {"name": f"p{i}"}, "spec": {}} for i in range(15)]
    assert script.first_round_ready(jobs + policies)
    assert not script.first_round_ready(jobs + policies[1:])
    jobs[0]["status"]["rayClusterName"] = None
    assert not script.first_round_ready(jobs + policies)


def test_the_summary_names_generated_clusters_policies_without_their_suffix() -> None:
    job = {
        "kind": "RayJob",
        "metadata": {"name": "npjob-k8s"},
        "status": {"rayClusterName": "npjob-k8s-x7k2q"},
    }
    policy = {
        "kind": "NetworkPolicy",
        "metadata": {"name": "npjob-k8s-x7k2q-head"},
        "spec": {"policyTypes": ["Ingress", "Egress"], "ingress": [{}, {}], "egress": [{}]},
    }
    assert script.policy_summary([job, policy]) == [
        "  - `npjob-k8s-<rand>-head`: Ingress+Egress, 2 ingress, 1 egress rules"
    ]
