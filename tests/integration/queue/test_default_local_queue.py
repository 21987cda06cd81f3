"""manageJobsWithoutQueueName: with RAYQUOTA_MANAGE_JOBS_WITHOUT_QUEUE_NAME, an unlabelled RayJob
in a namespace with a LocalQueue named ``default`` is queued there; elsewhere it runs as before.

These tests run their own operator (with the setting), scoped to their own namespace prefix so
the session's queue operator never sees their Ray objects."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.queue.conftest import (
    Quota,
    admitted_workload,
    cluster_pods,
    gpu_rayjob,
    is_admitted,
    running_operator,
    workload_of,
)
from tests.integration.ray.kubehelpers import Kube, wait_for

PREFIX = "qdefault"


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


@pytest.fixture(scope="module")
def default_queue_operator(crds_installed: None) -> Iterator[Path]:
    with running_operator(PREFIX, env={"RAYQUOTA_MANAGE_JOBS_WITHOUT_QUEUE_NAME": "true"}) as dashboards:
        yield dashboards


def unlabelled_rayjob(name: str, gpus: int) -> dict[str, Any]:
    """A RayJob written with no thought of queues: no queue label, not suspended."""
    job = gpu_rayjob(name, "unused", workers=1, gpus_per_worker=gpus)
    job["metadata"]["labels"] = {}
    job["spec"]["suspend"] = False
    return job


def test_unlabelled_rayjob_is_queued_on_the_namespace_default_queue(
    default_queue_operator: Path, kube: Kube, quota: Quota
) -> None:
    cq = quota.cluster_queue("team", {quota.flavor("a100", "a100"): 4})
    quota.local_queue("default", cq)
    # The LocalQueue's status is written by the operator: it has seen the queue.
    wait_for(
        "the default LocalQueue seen",
        lambda: (kube.get("localqueue.rayquota.io", "default") or {}).get("status"),
    )

    kube.apply(unlabelled_rayjob("first", gpus=4))
    first = admitted_workload(kube, "RayJob", "first")
    assert first["spec"]["queueName"] == "default"
    assert first["status"]["admission"]["clusterQueue"] == cq
    wait_for("first's 2 pods", lambda: len(cluster_pods(kube, "first")) == 2)

    kube.apply(unlabelled_rayjob("second", gpus=4))  # the quota is taken
    pending = wait_for(
        "second's Workload pending with a reason",
        lambda: (
            (wl := workload_of(kube, "RayJob", "second"))
            and (wl.get("status") or {}).get("pendingReason")
            and wl
        ),
    )
    assert pending["spec"]["queueName"] == "default"
    assert "nvidia.com/gpu" in pending["status"]["pendingReason"]
    wait_for("second suspended", lambda: (kube.get("rayjob", "second") or {})["spec"]["suspend"] is True)
    assert not cluster_pods(kube, "second")
    assert not is_admitted(workload_of(kube, "RayJob", "second"))

    kube.kubectl("delete", "rayjob", "first", "--wait=false")
    admitted_workload(kube, "RayJob", "second", timeout_s=120)
    wait_for("second's 2 pods", lambda: len(cluster_pods(kube, "second")) == 2)


def test_unlabelled_rayjob_without_a_default_queue_runs_as_before(
    default_queue_operator: Path, kube: Kube, quota: Quota
) -> None:
    # A queue exists, but under another name: nothing makes the RayJob queued.
    quota.local_queue("team", quota.cluster_queue("team", {quota.flavor("a100", "a100"): 4}))
    kube.apply(unlabelled_rayjob("free", gpus=8))  # beyond any quota
    wait_for("free's 2 pods", lambda: len(cluster_pods(kube, "free")) == 2)
    assert workload_of(kube, "RayJob", "free") is None
    job = kube.get("rayjob", "free")
    assert job is not None and job["spec"]["suspend"] is False


def test_unlabelled_rayjob_running_before_the_default_queue_keeps_running(
    default_queue_operator: Path, kube: Kube, quota: Quota
) -> None:
    kube.apply(unlabelled_rayjob("before", gpus=4))
    wait_for("before's 2 pods", lambda: len(cluster_pods(kube, "before")) == 2)
    # Creation timestamps have whole seconds: the queue must come in a later second to be later.
    before = kube.get("rayjob", "before")
    assert before is not None
    created = dt.datetime.fromisoformat(before["metadata"]["creationTimestamp"])
    wait_for("the next second", lambda: dt.datetime.now(dt.UTC) >= created + dt.timedelta(seconds=1))
    cq = quota.cluster_queue("team", {quota.flavor("a100", "a100"): 4})
    quota.local_queue("default", cq)
    wait_for(
        "the default LocalQueue seen",
        lambda: (kube.get("localqueue.rayquota.io", "default") or {}).get("status"),
    )
    # An update of the running job (any update: here a label) must not put it under quota.
    kube.patch("rayjob", "before", {"metadata": {"labels": {"touched": "yes"}}})
    kube.apply(unlabelled_rayjob("after", gpus=4))  # created since: queued, and admitted
    admitted_workload(kube, "RayJob", "after")
    assert workload_of(kube, "RayJob", "before") is None
    job = kube.get("rayjob", "before")
    assert job is not None and job["spec"]["suspend"] is False
    assert len(cluster_pods(kube, "before")) == 2
