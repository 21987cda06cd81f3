"""The admission webhooks, on an operator process of its own serving them on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from rayquota.localcluster.cluster import ClusterError
from tests.integration.queue.conftest import OperatorProcess, Quota, gpu_rayjob, workload_of
from tests.integration.ray.kubehelpers import Kube, wait_for

PREFIX = "qw"


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


@pytest.fixture
def webhook_operator(control_plane: Any, crds_installed: None) -> Iterator[None]:
    process = OperatorProcess(str(control_plane.kubeconfig), PREFIX, RAYQUOTA_WEBHOOK_PORT="0")
    process.start()
    try:
        wait_for(
            "the webhook configurations",
            lambda: (
                control_plane.kubectl(
                    "get", "validatingwebhookconfiguration", "rayquota-queue", check=False
                ).returncode
                == 0
            ),
            timeout_s=120,
        )
        yield
    finally:
        process.kill()
        control_plane.kubectl(
            "delete",
            "validatingwebhookconfiguration,mutatingwebhookconfiguration",
            "rayquota-queue",
            "--ignore-not-found",
            check=False,
        )


def test_queued_job_is_born_suspended_and_clearing_the_gate_is_refused(
    webhook_operator: None, kube: Kube, quota: Quota
) -> None:
    quota.a100_team_queue(4)
    job = gpu_rayjob("eager", "team", workers=2, gpus_per_worker=4)  # 8 GPUs on a queue of 4
    job["spec"]["suspend"] = False  # written as if there were no queue
    kube.apply(job)
    stored = kube.get("rayjob", "eager")
    assert stored is not None and stored["spec"]["suspend"] is True  # set at creation by the webhook
    wait_for("the Workload", lambda: workload_of(kube, "RayJob", "eager"), timeout_s=120)
    result = kube.kubectl(
        "patch", "rayjob", "eager", "--type", "merge", "-p", '{"spec":{"suspend":false}}', check=False
    )
    assert result.returncode != 0
    assert "not admitted" in result.stderr and "rayquota explain rayjob/eager" in result.stderr
    assert not kube.list("pods")


def test_malformed_cluster_queue_is_refused_with_the_field_named(
    webhook_operator: None, quota: Quota
) -> None:
    bad = {
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "x",
                            "resources": [
                                {"name": "cpu", "nominalQuota": 1},
                                {"name": "memory", "nominalQuota": 1},
                            ],
                        }
                    ],
                }
            ]
        }
    }
    with pytest.raises(ClusterError) as refused:
        quota.apply("ClusterQueue", "bad", bad)
    assert "spec.resourceGroups[0].flavors[0].resources" in str(refused.value)
