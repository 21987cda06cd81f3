"""The admission webhooks, on an operator process of its own serving them on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.localcluster.cluster import ClusterError
from tests.integration.queue.conftest import (
    OperatorProcess,
    Quota,
    gpu_job,
    gpu_rayjob,
    job_pods,
    running_pods,
    workload_of,
)
from tests.integration.ray import rayservice_support
from tests.integration.ray.kubehelpers import Kube, wait_for

PREFIX = "qw"


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


def webhook_configurations_exist(control_plane: Any) -> bool:
    return all(
        control_plane.kubectl("get", kind, "rayquota-queue", check=False).returncode == 0
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
    )


def delete_webhook_configurations(control_plane: Any) -> None:
    control_plane.kubectl(
        "delete",
        "validatingwebhookconfiguration,mutatingwebhookconfiguration",
        "rayquota-queue",
        "--ignore-not-found",
        check=False,
    )


def serving(process: OperatorProcess, log: Path) -> None:
    """Until this process registered its configurations (it logs once it has)."""
    wait_for(
        "the operator serving its webhooks",
        lambda: (
            process.proc is not None
            and process.proc.poll() is None
            and "admission webhooks on" in log.read_text()
        ),
        timeout_s=120,
    )


def webhooks_called(kube: Kube) -> bool:
    """The API server calls both webhooks (its cache of the configurations has caught up): a
    server-side dry run of a queued RayJob comes back suspended, and of a ClusterQueue covering a
    resource twice is refused."""
    job = gpu_rayjob("probe", "any-queue", workers=1, gpus_per_worker=1)
    del job["spec"]["suspend"]
    created = kube.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=yaml.safe_dump(job))
    if not json.loads(created.stdout)["spec"].get("suspend"):
        return False
    # Only the webhook refuses this one (the CRD's rules accept it).
    twice = {
        "apiVersion": "rayquota.io/v1alpha1",
        "kind": "ClusterQueue",
        "metadata": {"name": "probe"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": f, "resources": [{"name": "cpu", "nominalQuota": 1}]}],
                }
                for f in ("f1", "f2")
            ]
        },
    }
    refused = kube.kubectl("create", "--dry-run=server", "-f", "-", input=yaml.safe_dump(twice), check=False)
    return bool(refused.returncode != 0 and "is already covered by" in refused.stderr)


@pytest.fixture
def webhook_operator(control_plane: Any, crds_installed: None, kube: Kube, tmp_path: Path) -> Iterator[None]:
    delete_webhook_configurations(control_plane)  # nothing left from an earlier run
    log = tmp_path / "operator.log"
    process = OperatorProcess(str(control_plane.kubeconfig), PREFIX, log=log, RAYQUOTA_WEBHOOK_PORT="0")
    process.start()
    try:
        serving(process, log)
        wait_for("the API server calling the webhooks", lambda: webhooks_called(kube), 30)
        yield
    finally:
        process.kill()
        delete_webhook_configurations(control_plane)


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
    # A queued RayJob that would keep its cluster (and the quota) after the job: refused at creation.
    keeper = gpu_rayjob("keeper", "team", workers=1, gpus_per_worker=1)
    del keeper["spec"]["shutdownAfterJobFinishes"]
    refused = kube.kubectl("create", "-f", "-", input=yaml.safe_dump(keeper), check=False)
    assert refused.returncode != 0
    assert "spec.shutdownAfterJobFinishes: unset: a RayJob in queue team must set" in refused.stderr, (
        refused.stderr
    )
    assert kube.get("rayjob", "keeper") is None


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


def test_cluster_queue_without_a_namespace_selector_is_accepted_with_a_warning(
    webhook_operator: None, kube: Kube
) -> None:
    """rayquota.io reads an unset namespaceSelector as every namespace, Kueue as none: said at once."""

    def dry_run(**spec: Any) -> Any:
        group = {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1}]}],
        }
        queue = {
            "apiVersion": "rayquota.io/v1alpha1",
            "kind": "ClusterQueue",
            "metadata": {"name": f"{kube.ns}-selector"},
            "spec": {"resourceGroups": [group], **spec},
        }
        return kube.kubectl("create", "--dry-run=server", "-f", "-", input=yaml.safe_dump(queue))

    unset = dry_run()
    assert "Warning: spec.namespaceSelector is unset" in unset.stderr
    assert "namespaceSelector: {}" in unset.stderr
    assert "Warning" not in dry_run(namespaceSelector={}).stderr


def test_rayquota_run_serves_the_webhooks_on_the_local_control_plane_until_stopped(
    control_plane: Any, crds_installed: None, kube: Kube, quota: Quota, tmp_path: Path
) -> None:
    """`make run` as a newcomer runs it: no webhook flag, the local control plane's kubeconfig."""
    delete_webhook_configurations(control_plane)  # nothing left from an earlier run
    log = tmp_path / "operator.log"
    process = OperatorProcess(str(control_plane.kubeconfig), PREFIX, cli_default=True, log=log)
    process.start()
    try:
        serving(process, log)
        assert webhook_configurations_exist(control_plane)
        wait_for("the API server calling the webhooks", lambda: webhooks_called(kube), 30)
        started = [line for line in log.read_text().splitlines() if "components:" in line]
        assert len(started) == 1 and started[0].count("webhooks") == 1, started
        assert "webhooks (https://127.0.0.1:" in started[0]
        quota.a100_team_queue(4)
        job = gpu_rayjob("newcomer", "team", workers=2, gpus_per_worker=4)  # 8 GPUs: it stays queued
        del job["spec"]["suspend"]  # as most users write it
        kube.apply(job)
        stored = kube.get("rayjob", "newcomer")
        assert stored is not None and stored["spec"]["suspend"] is True
        wait_for("the Workload", lambda: workload_of(kube, "RayJob", "newcomer"), timeout_s=120)
        assert process.interrupt() == 0
    finally:
        process.kill()
    # Stopped: nothing left that the API server would call, and a queued object applies as written.
    assert not webhook_configurations_exist(control_plane)
    unqueued = gpu_rayjob("after", "team", workers=1, gpus_per_worker=1)
    unqueued["spec"]["suspend"] = False
    kube.apply(unqueued)
    after = kube.get("rayjob", "after")
    assert after is not None and after["spec"]["suspend"] is False


def test_a_stopping_operator_leaves_a_newer_registration_in_place(
    control_plane: Any, crds_installed: None, tmp_path: Path
) -> None:
    delete_webhook_configurations(control_plane)  # nothing left from an earlier run
    log = tmp_path / "operator.log"
    process = OperatorProcess(str(control_plane.kubeconfig), PREFIX, log=log, RAYQUOTA_WEBHOOK_PORT="0")
    process.start()
    try:
        serving(process, log)
        # Another operator registers after this one (here: any write to the configuration).
        control_plane.kubectl("label", "validatingwebhookconfiguration", "rayquota-queue", "newer=yes")
        assert process.interrupt() == 0
        assert (
            control_plane.kubectl(
                "get", "validatingwebhookconfiguration", "rayquota-queue", check=False
            ).returncode
            == 0
        )
        assert (
            control_plane.kubectl(
                "get", "mutatingwebhookconfiguration", "rayquota-queue", check=False
            ).returncode
            != 0
        )
    finally:
        process.kill()
        delete_webhook_configurations(control_plane)


def test_a_queued_batch_job_is_born_suspended_and_runs_only_as_admitted(
    webhook_operator: None, kube: Kube, quota: Quota
) -> None:
    """With the webhook, a Job written without ``suspend`` never gets a pod before admission."""
    quota.a100_team_queue(4)
    kube.apply(gpu_job("eager", "team", parallelism=2, completions=None, gpus=4, suspend=False))
    stored = kube.get("job", "eager")
    assert stored is not None and stored["spec"]["suspend"] is True  # set at creation by the webhook
    wait_for("the Workload", lambda: workload_of(kube, "Job", "eager"), timeout_s=120)
    result = kube.kubectl(
        "patch", "job", "eager", "--type", "merge", "-p", '{"spec":{"suspend":false}}', check=False
    )
    assert result.returncode != 0 and "not admitted" in result.stderr
    assert not job_pods(kube, "eager")
    # Once it fits, the queue lifts the gate itself (the webhook lets the admitted update through).
    kube.patch("job", "eager", {"spec": {"parallelism": 1}})
    [pod] = running_pods(kube, "eager", 1)
    assert pod["spec"]["nodeSelector"]["rayquota.io/gpu-pool"] == "a100"


def queued_rayservice(name: str, queue: str) -> dict[str, Any]:
    """A KubeRay RayService as its user writes it: the queue label, no gate anywhere."""
    service = rayservice_support.manifest()
    service["metadata"] = {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}}
    return service


def replace_as_written(kube: Kube, manifest: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """``kubectl replace -f`` as a user or a GitOps tool runs it: kubectl reads the live
    resourceVersion first, and a write in between (the operator's status) is a Conflict that
    they retry."""
    deadline = time.monotonic() + 30
    while True:
        result = kube.kubectl("replace", "-f", "-", input=yaml.safe_dump(manifest), check=False)
        if "(Conflict)" not in result.stderr or time.monotonic() > deadline:
            return result


def test_replacing_a_queued_rayservice_with_the_manifest_as_written_keeps_the_gate(
    webhook_operator: None, kube: Kube, quota: Quota
) -> None:
    """``kubectl replace -f`` (a PUT of the whole object) of the manifest the user wrote, which
    never named the gate the webhook set: the gate is carried over; clearing it is refused."""
    quota.a100_team_queue(4)
    service = queued_rayservice("replaced", "team")
    kube.kubectl("create", "-f", "-", input=yaml.safe_dump(service))
    stored = kube.get("rayservice", "replaced")
    assert stored is not None and stored["spec"]["rayClusterConfig"]["suspend"] is True
    service["spec"]["serveConfigV2"] = rayservice_support.serve_config("v2")  # the user's change
    replaced = replace_as_written(kube, service)
    assert replaced.returncode == 0, replaced.stderr
    after = kube.get("rayservice", "replaced")
    assert after is not None and after["spec"]["rayClusterConfig"]["suspend"] is True
    assert "message: v2" in after["spec"]["serveConfigV2"]
    service["spec"]["rayClusterConfig"]["suspend"] = False  # an explicit attempt to clear it
    cleared = replace_as_written(kube, service)
    assert cleared.returncode != 0
    assert "spec.rayClusterConfig.suspend is the queue's gate and stays set" in cleared.stderr


def test_a_typo_in_the_queue_label_is_said_at_apply_time_and_as_a_warning_event(
    webhook_operator: None, kube: Kube, quota: Quota
) -> None:
    quota.a100_team_queue(4)
    job = gpu_rayjob("typo", "does-not-exist", workers=1, gpus_per_worker=1)
    created = kube.kubectl("create", "-f", "-", input=yaml.safe_dump(job))
    assert f"LocalQueue {kube.ns}/does-not-exist does not exist" in created.stderr, created.stderr
    fine = kube.kubectl("create", "-f", "-", input=yaml.safe_dump(gpu_rayjob("fine", "team", 1, 1)))
    assert "does not exist" not in fine.stderr, fine.stderr

    def warned() -> bool:
        return any(
            e["type"] == "Warning" and "LocalQueue" in e["message"] and "does not exist" in e["message"]
            for e in kube.events("typo")
        )

    wait_for("a Warning event naming the missing LocalQueue", warned, timeout_s=120)


def test_a_quota_that_is_not_a_quantity_is_refused_in_words(webhook_operator: None, quota: Quota) -> None:
    body = {
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8 GPUs"}]}
                    ],
                }
            ]
        }
    }
    with pytest.raises(ClusterError) as refused:
        quota.apply("ClusterQueue", "words", body)
    message = str(refused.value)
    assert "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota" in message, message
    assert "not a Kubernetes quantity" in message, message
    assert "should match" not in message, message  # the CRD schema's regular expression


def test_a_cohort_quota_that_is_not_a_quantity_is_refused_in_words(
    webhook_operator: None, control_plane: Any, quota: Quota
) -> None:
    """A Cohort's quota is checked as a ClusterQueue's, at creation and on an update."""

    def cohort(gpus: str) -> dict[str, Any]:
        resources = [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]
        groups = [
            {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "a100", "resources": resources}]}
        ]
        return {"spec": {"resourceGroups": groups}}

    field = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
    with pytest.raises(ClusterError) as refused:
        quota.apply("Cohort", "words", cohort("8 GPUs"))
    message = str(refused.value)
    assert f"{field}: invalid quantity '8 GPUs': not a Kubernetes quantity" in message, message
    assert "should match" not in message, message  # the CRD schema's regular expression
    name = quota.apply("Cohort", "words", cohort("8"))  # a valid Cohort is accepted
    stored = json.loads(control_plane.kubectl("get", "cohorts.rayquota.io", name, "-o", "json").stdout)
    assert stored["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "8"
    with pytest.raises(ClusterError) as refused:
        quota.apply("Cohort", "words", cohort("8 GPUs"))
    assert f"{field}: invalid quantity '8 GPUs'" in str(refused.value), str(refused.value)
