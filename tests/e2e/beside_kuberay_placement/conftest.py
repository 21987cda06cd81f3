"""Placement and readiness beside KubeRay's real operator: the beside-KubeRay package's control
plane and KubeRay fixtures, with an admission-only rayquota of each test's own (its readiness
settings differ from the shared stage's, so it runs in a package of its own)."""

from __future__ import annotations

import pytest

from rayquota.localcluster.cluster import LocalCluster
from tests.e2e.beside_kuberay.conftest import kuberay_cluster, kuberay_namespace, kuberay_operator
from tests.quota import REPO

__all__ = ["kuberay_cluster", "kuberay_namespace", "kuberay_operator"]


@pytest.fixture(scope="package")
def rayquota_crds(kuberay_cluster: LocalCluster) -> None:
    """Only rayquota.io's CRDs: the ray.io ones stay KubeRay's."""
    crds = sorted(str(p) for p in (REPO / "crds").glob("rayquota.io_*.yaml"))
    args = [arg for path in crds for arg in ("-f", path)]
    kuberay_cluster.kubectl("apply", "--server-side", "--force-conflicts", *args, timeout=300)
