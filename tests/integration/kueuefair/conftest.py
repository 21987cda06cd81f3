"""The operator in Kueue-API mode with Kueue's ``fairSharing`` and ``admissionFairSharing`` on,
scoped to ``kqf-*`` namespaces.

Its own folder: fair sharing is one setting for the whole operator (as Kueue's Configuration),
and ClusterQueues are cluster-scoped, so it must not run beside ``kueueapi``'s operator, which is
stopped when that folder ends.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.kueueapi.conftest import kube, kueue_crds, kueue_quota
from tests.integration.queue.conftest import running_operator

__all__ = ["kube", "kueue_crds", "kueue_quota"]

PREFIX = "kqf"
FAIR_ENV = {
    "RAYQUOTA_QUEUE_API": "kueue",
    "RAYQUOTA_FAIR_SHARING": "true",
    "RAYQUOTA_FAIR_SHARING_PREEMPTION_STRATEGIES": "LessThanOrEqualToFinalShare,LessThanInitialShare",
    # Kueue's admissionFairSharing; only ClusterQueues with an admissionScope use it. Sampled
    # every second so a test sees a LocalQueue's consumed usage without waiting minutes.
    "RAYQUOTA_ADMISSION_FAIR_SHARING_HALF_LIFE": "1h",
    "RAYQUOTA_ADMISSION_FAIR_SHARING_SAMPLING_INTERVAL": "1s",
}


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


@pytest.fixture(scope="package")
def fair_operator(crds_installed: None, kueue_crds: None) -> Iterator[None]:
    with running_operator(PREFIX, FAIR_ENV):
        yield
