"""Kueue's ClusterQueue keeps its meaning in Kueue-API mode: an unset ``namespaceSelector``
admits from no namespace, ``{}`` from every one (apis/kueue/v1beta2/clusterqueue_types.go,
"Defaults to null which is a nothing selector"). Manifests from Kueue's own examples
(site/static/examples/admin/single-clusterqueue-setup.yaml), renamed per test."""

from __future__ import annotations

from typing import Any

import yaml

from tests.integration.kueueapi.conftest import KueueQuota, kueue_workload
from tests.integration.ray.kubehelpers import Kube, condition, wait_for

WORKLOADS = "workloads.kueue.x-k8s.io"

# Kueue's single-ClusterQueue example as its docs give it.
KUEUE_SINGLE_CLUSTERQUEUE = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: "cluster-queue"
spec:
  namespaceSelector: {} # match all.
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "cpu"
        nominalQuota: 9
      - name: "memory"
        nominalQuota: 36Gi
"""


def _kueue_spec(flavor: str, *, selector: bool) -> dict[str, Any]:
    spec = dict(yaml.safe_load(KUEUE_SINGLE_CLUSTERQUEUE)["spec"])
    spec["resourceGroups"][0]["flavors"][0]["name"] = flavor
    if not selector:
        del spec["namespaceSelector"]
    return spec


def _reserved(kube: Kube, name: str, status: str) -> dict[str, Any]:
    return wait_for(
        f"Workload {name} QuotaReserved={status}",
        lambda: (
            (wl := kube.get(WORKLOADS, name)) is not None
            and (condition(wl, "QuotaReserved") or {}).get("status") == status
            and wl
        ),
    )


def test_unset_namespace_selector_admits_from_no_namespace(
    kueue_operator: None, kube: Kube, kueue_quota: KueueQuota, namespace: str
) -> None:
    flavor = kueue_quota.kueue_flavor("default-flavor")
    every = kueue_quota.apply("ClusterQueue", "every", {"spec": _kueue_spec(flavor, selector=True)})
    unset = kueue_quota.apply("ClusterQueue", "unset", {"spec": _kueue_spec(flavor, selector=False)})
    kueue_quota.local_queue("every", every)
    kueue_quota.local_queue("unset", unset)
    kube.apply(kueue_workload("on-every", "every", "1"))
    kube.apply(kueue_workload("on-unset", "unset", "1"))

    admitted = _reserved(kube, "on-every", "True")
    assert admitted["status"]["admission"]["clusterQueue"] == every
    pending = _reserved(kube, "on-unset", "False")
    message = condition(pending, "QuotaReserved")["message"]  # type: ignore[index]
    assert f"ClusterQueue {unset} selects no namespace" in message
    assert not (pending.get("status") or {}).get("admission")

    # The queue's owners name the namespace: now it is selected, and admitted.
    spec = _kueue_spec(flavor, selector=False)
    spec["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    kueue_quota.apply("ClusterQueue", "unset", {"spec": spec})
    admitted = _reserved(kube, "on-unset", "True")
    assert admitted["status"]["admission"]["clusterQueue"] == unset
