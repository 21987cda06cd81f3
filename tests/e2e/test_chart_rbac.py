"""The chart grants exactly what the code uses: no permission missing, none unused.

What the code uses is read off a Manager on which every enabled component ran its setup()
(each informer needs list+watch) plus the writes declared in rayquota.operator.permissions;
the end-to-end run under the chart's ServiceAccount (test_cli_and_chart.py) checks those
declarations against the requests the operator really makes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rayquota.operator.config import OperatorConfig
from rayquota.operator.feature_gates import FeatureGates
from rayquota.operator.permissions import (
    Permission,
    RequiredPermissions,
    offline_manager,
    required_permissions,
)
from rayquota.operator.queue.dra.settings import DeviceClassMapping, DraSettings
from rayquota.operator.queue.multikueue.settings import MultiKueueSettings
from tests.e2e.chart import find, render

Grant = tuple[str, str, str]  # (api group, resource, verb)

NETWORK_POLICY_GATE = "featureGates[0].name=RayClusterNetworkPolicy"


def granted(role: dict[str, Any]) -> set[Grant]:
    return {
        (group, resource, verb)
        for rule in role.get("rules") or []
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def grants(permissions: frozenset[Permission]) -> set[Grant]:
    return {(p.group, p.resource, p.verb) for p in permissions}


# Device classes mapped to quota (docs/dra.md): the queue then reads ResourceClaimTemplates.
DRA_MAPPING = (
    "operatorConfiguration.resources.deviceClassMappings[0].name=example.com/gpu",
    "operatorConfiguration.resources.deviceClassMappings[0].deviceClassNames[0]=gpu.example.com",
)


def needed(
    reconcilers: bool, self_issued_cert: bool, multikueue: bool = False, gates: str = "", dra: bool = False
) -> RequiredPermissions:
    config = OperatorConfig(
        reconcilers_enabled=reconcilers,
        multikueue=MultiKueueSettings() if multikueue else None,
        feature_gates=FeatureGates.parse(gates),
    )
    if dra:
        mappings = (DeviceClassMapping("example.com/gpu", ("gpu.example.com",)),)
        labels = dataclasses.replace(config.queue.labels, dra=DraSettings(mappings))
        config = dataclasses.replace(config, queue=dataclasses.replace(config.queue, labels=labels))
    manager, components = offline_manager(config)
    return required_permissions(manager, components, self_issued_cert=self_issued_cert)


def assert_same(kind: str, rendered: set[Grant], wanted: set[Grant]) -> None:
    missing, unused = sorted(wanted - rendered), sorted(rendered - wanted)
    assert not missing and not unused, f"{kind}: missing {missing}, unused {unused}"


@pytest.mark.parametrize(
    ("values", "reconcilers", "self_issued_cert"),
    [
        ((), True, True),
        (("reconcilers.enabled=false",), False, True),
        (("webhooks.certManager.enabled=true",), True, False),
        (("reconcilers.enabled=false", "webhooks.enabled=false"), False, False),
        (("multikueue.enabled=true",), True, True),
        (("multikueue.enabled=true", "reconcilers.enabled=false"), False, True),
        ((NETWORK_POLICY_GATE, "featureGates[0].enabled=true"), True, True),
        (DRA_MAPPING, True, True),
        ((*DRA_MAPPING, "reconcilers.enabled=false"), False, True),
        ((*DRA_MAPPING, "operatorConfiguration.queue.dra.integration=false"), True, True),
    ],
    ids=[
        "full",
        "admission-only",
        "cert-manager",
        "admission-only-no-webhooks",
        "multikueue",
        "multikueue-only",
        "network-policy",
        "dra",
        "dra-admission-only",
        "dra-integration-off",
    ],
)
def test_the_chart_grants_exactly_what_the_code_uses(
    values: tuple[str, ...], reconcilers: bool, self_issued_cert: bool
) -> None:
    objects = render(*values)
    gates = "RayClusterNetworkPolicy=true" if NETWORK_POLICY_GATE in values else ""
    dra = DRA_MAPPING[0] in values and "operatorConfiguration.queue.dra.integration=false" not in values
    multikueue = "multikueue.enabled=true" in values
    wanted = needed(reconcilers, self_issued_cert, multikueue, gates, dra=dra)
    [namespaced] = find(objects, "ClusterRole", "rq-rayquota")
    [cluster] = find(objects, "ClusterRole", "rq-rayquota-cluster")
    [own] = find(objects, "Role", "rq-rayquota")
    assert_same("namespaced ClusterRole", granted(namespaced), grants(wanted.namespaced))
    assert_same("cluster ClusterRole", granted(cluster), grants(wanted.cluster))
    assert_same("release-namespace Role", granted(own), grants(wanted.own_namespace))


def test_names_narrow_the_lease_secret_and_webhook_configurations() -> None:
    objects = render()
    [own] = find(objects, "Role", "rq-rayquota")
    by_resource = {(tuple(r["resources"]), tuple(r["verbs"])): r.get("resourceNames") for r in own["rules"]}
    # create cannot be narrowed by name (the object does not exist yet); get/update can.
    assert by_resource[(("leases",), ("create",))] is None
    assert by_resource[(("leases",), ("get", "update"))] == ["rayquota-operator"]
    assert by_resource[(("secrets",), ("get", "update"))] == ["rq-rayquota-webhook-cert"]
    [cluster] = find(objects, "ClusterRole", "rq-rayquota-cluster")
    webhook_rules = [r for r in cluster["rules"] if r["apiGroups"] == ["admissionregistration.k8s.io"]]
    assert [r.get("resourceNames") for r in webhook_rules] == [["rq-rayquota"]]


def test_managed_namespaces_bind_the_namespaced_role_there_only() -> None:
    objects = render("watchNamespaces={team-a,team-b}")
    bindings = [b for b in find(objects, "RoleBinding") if b["roleRef"]["kind"] == "ClusterRole"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    assert {b["roleRef"]["name"] for b in bindings} == {"rq-rayquota"}
    cluster_bindings = {b["roleRef"]["name"] for b in find(objects, "ClusterRoleBinding")}
    # system:auth-delegator: the pending-workloads API's delegated authorization (visibility.yaml).
    assert cluster_bindings == {"rq-rayquota-cluster", "system:auth-delegator"}
    # Cluster-wide by default.
    assert {b["roleRef"]["name"] for b in find(render(), "ClusterRoleBinding")} == {
        "rq-rayquota",
        "rq-rayquota-cluster",
        "system:auth-delegator",
    }
