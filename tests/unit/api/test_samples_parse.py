"""Every manifest under samples/ parses into its model and survives a round trip unchanged."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from rayquota.api.common import KubeObject
from rayquota.api.crdgen import ALL_KINDS
from rayquota.api.ray_v1 import (
    ClusterUpgradeOptions,
    JobSubmissionMode,
    RayCluster,
    RayJob,
    RayService,
    RayServiceUpgradeType,
)
from tests.sample_documents import SAMPLES, sample_documents

KIND_BY_NAME: dict[str, type[KubeObject]] = {k.crd.kind: k for k in ALL_KINDS}


DOCUMENTS = sample_documents()


def test_there_are_samples_of_every_kind_except_workload() -> None:
    kinds = {doc["kind"] for _, doc in DOCUMENTS}
    assert kinds == set(KIND_BY_NAME) - {"Workload"}


@pytest.mark.parametrize(("where", "doc"), DOCUMENTS, ids=[w for w, _ in DOCUMENTS])
def test_sample_round_trips(where: str, doc: dict[str, Any]) -> None:
    model = KIND_BY_NAME[doc["kind"]]
    obj = model.from_body(doc)
    assert obj.to_body() == doc, where


def test_k8s_job_mode_sample_reads_what_the_reconciler_needs() -> None:
    job = RayJob.from_body(yaml.safe_load((SAMPLES / "ray-job.k8s-job-mode.yaml").read_text()))
    assert job.spec.submission_mode is JobSubmissionMode.K8S_JOB
    assert job.spec.runtime_env_yaml is not None and "GREETING" in job.spec.runtime_env_yaml
    assert job.spec.shutdown_after_job_finishes is True
    assert job.spec.ttl_seconds_after_finished == 60
    assert job.spec.submitter_config is not None and job.spec.submitter_config.backoff_limit == 2
    cluster = job.spec.ray_cluster_spec
    assert cluster is not None
    worker = cluster.worker_group_specs[0]
    assert worker.group_name == "gpu-h100"
    pod = worker.template.spec
    assert pod.node_selector == {"rayquota.io/gpu-pool": "h100"}
    assert pod.tolerations[0].key == "nvidia.com/gpu"
    assert pod.containers[0].resources.limits["nvidia.com/gpu"] == 1


def test_submission_mode_defaults_to_k8s_job_mode() -> None:
    job = RayJob.from_body(
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"}, "spec": {}}
    )
    assert job.spec.submission_mode is JobSubmissionMode.K8S_JOB
    assert job.spec.backoff_limit == 0
    # Defaults are not written back: the body stays what the user sent.
    assert "submissionMode" not in job.to_body()["spec"]


def test_complete_cluster_sample() -> None:
    rc = RayCluster.from_body(yaml.safe_load((SAMPLES / "ray-cluster.complete.yaml").read_text()))
    assert rc.spec.enable_in_tree_autoscaling is True
    assert rc.spec.autoscaler_options is not None
    assert rc.spec.autoscaler_options.idle_timeout_seconds == 120
    assert rc.spec.head_group_spec.ray_start_params["num-cpus"] == "0"
    gpu, cpu = rc.spec.worker_group_specs
    assert (gpu.replicas, gpu.min_replicas, gpu.max_replicas, gpu.desired_pods) == (2, 1, 4, 2)
    assert cpu.ray_start_params == {"num-cpus": "2"}


def test_incremental_upgrade_sample() -> None:
    svc = RayService.from_body(yaml.safe_load((SAMPLES / "ray-service.incremental-upgrade.yaml").read_text()))
    strategy = svc.spec.upgrade_strategy
    assert strategy is not None
    assert strategy.type is RayServiceUpgradeType.NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE
    assert strategy.cluster_upgrade_options == ClusterUpgradeOptions(
        max_surge_percent=40, step_size_percent=20, interval_seconds=30, gateway_class_name="istio"
    )
    assert svc.spec.serve_config_v2 is not None and "LLMServer" in svc.spec.serve_config_v2
    assert svc.spec.ray_cluster_spec.worker_group_specs[0].max_replicas == 8
