"""In Kueue-API mode, Kueue's own MultiKueue manifests (kueue.x-k8s.io/v1beta2 AdmissionCheck,
MultiKueueConfig, MultiKueueCluster with its kubeconfig Secret) apply unchanged against Kueue's
CRDs, and a manager operator in that mode connects to the worker they name and marks both
Active."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from rayquota.localcluster import kueue_crds
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.multicluster import SECRET_NAMESPACE, embedded_kubeconfig
from tests.integration.multicluster.conftest import PREFIX, Fleet, Side, apply_yaml
from tests.integration.queue.conftest import OperatorProcess
from tests.integration.ray.kubehelpers import condition
from tests.polling import wait_for

KUEUE = "kueue.x-k8s.io/v1beta2"


def kueue_manifests(stem: str, kubeconfig: str) -> list[dict[str, Any]]:
    """A platform team's Kueue MultiKueue set-up, as Kueue documents its shape."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{stem}-worker1-secret", "namespace": SECRET_NAMESPACE},
            "data": {"kubeconfig": base64.b64encode(kubeconfig.encode()).decode()},
        },
        {
            "apiVersion": KUEUE,
            "kind": "MultiKueueCluster",
            "metadata": {"name": f"{stem}-worker1"},
            "spec": {
                "clusterSource": {
                    "kubeConfig": {"locationType": "Secret", "location": f"{stem}-worker1-secret"}
                }
            },
        },
        {
            "apiVersion": KUEUE,
            "kind": "MultiKueueConfig",
            "metadata": {"name": f"{stem}-config"},
            "spec": {"clusters": [f"{stem}-worker1"]},
        },
        {
            "apiVersion": KUEUE,
            "kind": "AdmissionCheck",
            "metadata": {"name": f"{stem}-multikueue"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "MultiKueueConfig",
                    "name": f"{stem}-config",
                },
            },
        },
    ]


def _subset(sent: Any, stored: Any) -> bool:
    """Everything sent is stored as sent (the API server may add defaults)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(
            k in stored and _subset(v, stored[k]) for k, v in sent.items()
        )
    return bool(sent == stored)


def _install_workload_crd(cluster: LocalCluster) -> None:
    cluster.kubectl(
        "apply", "--server-side", "-f", str(kueue_crds.crd_dir() / "kueue.x-k8s.io_workloads.yaml")
    )
    wait_for(
        "Kueue's Workload CRD established in the worker",
        lambda: (
            cluster.kubectl(
                "get",
                "crd",
                "workloads.kueue.x-k8s.io",
                "-o",
                "jsonpath={.status.conditions[?(@.type=='Established')].status}",
                check=False,
            ).stdout
            == "True"
        ),
    )


@pytest.fixture
def kueue_manager(fleet: Fleet) -> Iterator[None]:
    """Kueue's CRDs in the manager and worker1, and a manager operator in Kueue-API mode (no Ray
    reconcilers: the rayquota-mode operator beside it runs those) on namespaces it alone uses."""
    # The manager needs all of Kueue's kinds; the worker only the Workloads the manager watches.
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = [
            pool.submit(kueue_crds.install, fleet.manager),
            pool.submit(_install_workload_crd, fleet.workers["worker1"]),
        ]
        for future in done:
            future.result()
    operator = OperatorProcess(
        str(fleet.manager.kubeconfig),
        f"{PREFIX}kueue",
        log=fleet.logs / "manager-kueue-mode.log",
        RAYQUOTA_QUEUE_API="kueue",
        RAYQUOTA_RECONCILERS_ENABLED="false",
        RAYQUOTA_MULTIKUEUE="true",
        RAYQUOTA_MULTIKUEUE_NAMESPACE=SECRET_NAMESPACE,
    )
    operator.start()
    try:
        yield
    finally:
        operator.kill()  # it holds no lease and serves no webhook: nothing to hand over


def test_kueues_multikueue_manifests_apply_unchanged_and_are_served(
    fleet: Fleet, sides: dict[str, Side], kueue_manager: None
) -> None:
    stem = sides["manager"].kube.ns
    docs = kueue_manifests(stem, embedded_kubeconfig(fleet.workers["worker1"]))
    try:
        apply_yaml(fleet.manager, docs)
        for doc in docs[1:]:
            resource = f"{doc['kind'].lower()}s.kueue.x-k8s.io"
            stored = json.loads(
                fleet.manager.kubectl("get", resource, doc["metadata"]["name"], "-o", "json").stdout
            )
            assert _subset(doc["spec"], stored["spec"]), (
                f"{doc['kind']} changed by the API server: {stored['spec']}"
            )

        def active(resource: str, name: str) -> bool:
            got = fleet.manager.kubectl("get", resource, name, "-o", "json", check=False)
            return (
                got.returncode == 0
                and (condition(json.loads(got.stdout), "Active") or {}).get("status") == "True"
            )

        wait_for(
            "Kueue's MultiKueueCluster connected and its AdmissionCheck Active",
            lambda: (
                active("multikueueclusters.kueue.x-k8s.io", f"{stem}-worker1")
                and active("admissionchecks.kueue.x-k8s.io", f"{stem}-multikueue")
            ),
            timeout_s=120,
        )
    finally:
        for doc in reversed(docs):
            namespace = ["-n", doc["metadata"]["namespace"]] if "namespace" in doc["metadata"] else []
            group = "" if doc["apiVersion"] == "v1" else ".kueue.x-k8s.io"
            fleet.manager.kubectl(
                "delete",
                f"{doc['kind'].lower()}{group}",
                doc["metadata"]["name"],
                *namespace,
                "--wait=false",
                check=False,
            )
