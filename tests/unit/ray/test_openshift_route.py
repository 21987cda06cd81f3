"""The OpenShift Route for enableIngress (KubeRay v1.7.0's BuildRouteForHeadService and its
start-up choice between a Route and an Ingress)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from rayquota.operator.config import OperatorConfig
from rayquota.operator.ray.builders import route
from tests.config_env import operator_config_from_env
from tests.unit.ray.fixtures import BASE_CLUSTER


def ingress_cluster(**head: Any) -> dict[str, Any]:
    cluster = copy.deepcopy(BASE_CLUSTER)
    cluster["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "nginx", "team": "a"}
    cluster["spec"]["headGroupSpec"].update(enableIngress=True, **head)
    return cluster


def test_the_route_goes_to_the_head_service_dashboard_port_with_kuberays_labels_and_owner() -> None:
    built = route.build_route(ingress_cluster())
    assert built["apiVersion"] == "route.openshift.io/v1" and built["kind"] == "Route"
    assert built["metadata"]["name"] == "demo-head-route"
    assert built["metadata"]["namespace"] == "team-a"
    assert built["metadata"]["labels"] == {
        "ray.io/cluster": "demo",
        "ray.io/identifier": "demo-head",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }
    # Every annotation is copied (KubeRay keeps even the ingress class on a Route).
    assert built["metadata"]["annotations"] == {"kubernetes.io/ingress.class": "nginx", "team": "a"}
    [owner] = built["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "RayCluster",
        "demo",
        "uid-1",
        True,
    )
    assert built["spec"] == {
        "to": {"kind": "Service", "name": "demo-head-svc", "weight": 100},
        "port": {"targetPort": 8265},
        "wildcardPolicy": "None",
    }


def test_the_route_follows_a_custom_head_service_name_and_dashboard_port() -> None:
    cluster = ingress_cluster(headService={"metadata": {"name": "team-dash"}})
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["ports"] = [{"name": "dashboard", "containerPort": 9000}]
    spec = route.build_route(cluster)["spec"]
    assert spec["to"]["name"] == "team-dash" and spec["port"] == {"targetPort": 9000}


@pytest.mark.parametrize(
    ("cluster", "namespace", "expected"),
    [
        ("demo", "team-a", "demo-head-route"),
        # Cut at its end to 51 - len(namespace), so "<name>-<namespace>" fits a host label.
        ("a" * 40, "n" * 20, ("a" * 40 + "-head-route")[:31]),
        ("1" + "b" * 10, "ns", "r" + "b" * 10 + "-head-route"),  # no leading digit
    ],
)
def test_route_names_are_cut_as_kuberay_cuts_them(cluster: str, namespace: str, expected: str) -> None:
    assert route.route_name(cluster, namespace) == expected


def test_only_openshifts_api_groups_mean_openshift() -> None:
    assert route.is_openshift(["apps", "route.openshift.io"])
    assert route.is_openshift(["security.openshift.io"]) and route.is_openshift(["config.openshift.io"])
    assert not route.is_openshift(["apps", "ray.io", "custom.openshift.io"])


def test_routes_of_a_cluster_are_those_with_its_label() -> None:
    mine = {"metadata": {"labels": {"ray.io/cluster": "demo"}}}
    other = {"metadata": {"labels": {"ray.io/cluster": "other"}}}
    assert route.routes_of(BASE_CLUSTER, [mine, other, {"metadata": {}}]) == [mine]


def test_routes_only_on_openshift_and_not_with_use_ingress_on_openshift() -> None:
    assert not OperatorConfig().openshift_routes  # not looked at yet: no Routes
    assert dataclasses.replace(OperatorConfig(), openshift=True).openshift_routes
    assert not dataclasses.replace(OperatorConfig(), openshift=False).openshift_routes
    honoured = operator_config_from_env({"USE_INGRESS_ON_OPENSHIFT": "true"})
    assert honoured.use_ingress_on_openshift
    assert not dataclasses.replace(honoured, openshift=True).openshift_routes
    assert not operator_config_from_env({"USE_INGRESS_ON_OPENSHIFT": "false"}).use_ingress_on_openshift


def test_a_namespace_too_long_for_a_route_host_is_named_and_no_route_built() -> None:
    cluster = ingress_cluster()
    cluster["metadata"]["namespace"] = "n" * 51
    assert route.route_name("demo", "n" * 51) is None
    problem = route.unroutable(cluster)
    assert problem is not None and repr("n" * 51) in problem and "51 characters" in problem
    with pytest.raises(ValueError, match="51 characters"):
        route.build_route(cluster)
    assert route.unroutable(ingress_cluster()) is None
