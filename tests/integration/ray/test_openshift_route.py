"""enableIngress on OpenShift: the Route KubeRay v1.7.0 makes instead of an Ingress.

The Route API is a CRD installed by this module (OpenShift's own group, so the operator started
after it sees an OpenShift API server, as KubeRay's start-up discovery does); it is removed at
the end, so no later operator on this control plane takes the cluster for OpenShift.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rayquota.operator.config import OperatorConfig
from tests.integration.ray.kubehelpers import Kube
from tests.operator_thread import operator_thread
from tests.polling import wait_for

pytestmark = pytest.mark.ray

PREFIX = "rqroute"
ROUTE_CRD = Path(__file__).parent / "data" / "openshift-route-crd.yaml"


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


@pytest.fixture(scope="module")
def openshift_operator(control_plane: Any, crds_installed: None) -> Iterator[None]:
    control_plane.kubectl("apply", "-f", str(ROUTE_CRD))
    try:
        wait_for(
            "route.openshift.io/v1 served",
            lambda: "route.openshift.io/v1" in control_plane.kubectl("api-versions").stdout.split(),
            30,
        )
        with operator_thread(OperatorConfig(version="test-1"), [f"{PREFIX}-*"]):
            yield
    finally:
        control_plane.kubectl("delete", "-f", str(ROUTE_CRD), "--wait=true")


@pytest.fixture
def kube(control_plane: Any, namespace: str, openshift_operator: None) -> Kube:
    return Kube(control_plane, namespace)


def raycluster(name: str) -> dict[str, Any]:
    ports = [{"name": "dashboard", "containerPort": 8444}, {"name": "gcs-server", "containerPort": 6379}]
    head = {
        "enableIngress": True,
        "rayStartParams": {},
        "headService": {"metadata": {"name": "team-dash"}},
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "ray-head",
                        "image": "rayproject/ray:2.60.0",
                        "ports": ports,
                        "resources": {"requests": {"cpu": "100m"}},
                    }
                ]
            }
        },
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "annotations": {"haproxy.router.openshift.io/timeout": "5m"}},
        "spec": {"rayVersion": "2.60.0", "headGroupSpec": head},
    }


def test_route(kube: Kube) -> None:
    """enableIngress on OpenShift makes a Route to the head Service's actual name and port (a short
    test name: a Route's host leaves its namespace at most 50 characters)."""
    kube.apply(raycluster("dash"))
    route = wait_for("the head's Route", lambda: kube.get("route", "dash-head-route"), 60)
    service = wait_for("the head Service", lambda: kube.get("service", "team-dash"), 30)
    [dashboard] = [p for p in service["spec"]["ports"] if p["name"] == "dashboard"]
    cluster = kube.get("raycluster", "dash")
    assert cluster is not None
    assert route["spec"] == {
        "to": {"kind": "Service", "name": "team-dash", "weight": 100},
        "port": {"targetPort": dashboard["port"]},
        "wildcardPolicy": "None",
    }
    assert dashboard["port"] == 8444
    assert route["metadata"]["labels"] == {
        "ray.io/cluster": "dash",
        "ray.io/identifier": "dash-head",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }
    # All of the cluster's annotations, as KubeRay copies them (kubectl's last-applied one too).
    assert route["metadata"]["annotations"] == cluster["metadata"]["annotations"]
    assert route["metadata"]["annotations"]["haproxy.router.openshift.io/timeout"] == "5m"
    [owner] = route["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "RayCluster",
        cluster["metadata"]["uid"],
        True,
    )
    assert kube.list("ingresses") == []
    wait_for(
        "the CreatedRoute event", lambda: any(e["reason"] == "CreatedRoute" for e in kube.events("dash")), 30
    )
