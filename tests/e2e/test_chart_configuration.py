"""The chart renders rayquota's configuration file into a ConfigMap, mounts it and passes it with
--config; what it renders is a configuration the operator accepts. In Kueue-API mode it takes
Kueue's own Configuration unchanged (kueueConfiguration), and the RBAC follows the configuration."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.config import ConfigError, build, load
from tests.e2e.chart import configuration_of, find, render, template


def test_the_configuration_is_rendered_mounted_and_passed(tmp_path: Path) -> None:
    objects = render("operatorConfiguration.controller.resyncInterval=10m")
    [config_map] = [c for c in find(objects, "ConfigMap") if c["metadata"]["name"].endswith("-config")]
    [deployment] = find(objects, "Deployment")
    pod = deployment["spec"]["template"]
    [container] = pod["spec"]["containers"]
    assert "--config=/etc/rayquota/config/config.yaml" in container["args"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
    assert mount == {"name": "config", "mountPath": "/etc/rayquota/config", "readOnly": True}
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "config")
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert "checksum/config" in pod["metadata"]["annotations"]

    path = tmp_path / "config.yaml"
    path.write_text(config_map["data"]["config.yaml"])
    loaded = load(path)
    assert loaded.configuration.controller.resyncInterval == 600
    assert build.settings(loaded).operator.resync_interval_s == 600


def test_a_changed_configuration_rolls_the_pods() -> None:
    def checksum(*sets: str) -> str:
        [deployment] = find(render(*sets), "Deployment")
        return str(deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum() != checksum("operatorConfiguration.rayDashboard.timeout=10s")


def test_the_charts_values_are_configuration_keys_and_operator_configuration_wins() -> None:
    objects = render(
        "waitForPodsReady.enabled=true",
        "waitForPodsReady.timeout=20",
        "waitForPodsReady.requeuingStrategy.backoffLimitCount=2",
        "multikueue.enabled=true",
        "multikueue.dispatcher=MostFreeQuota",
        "kueueApi.enabled=true",
        "operatorConfiguration.waitForPodsReady.blockAdmission=true",
        "operatorConfiguration.queue.api=rayquota",
    )
    loaded = configuration_of(objects)
    assert not loaded.warnings
    operator = build.settings(loaded).operator
    ready = operator.queue.wait_for_pods_ready
    assert ready is not None and (ready.timeout_s, ready.backoff_limit_count) == (20, 2)
    assert ready.block_admission  # operatorConfiguration, merged key by key over the values
    assert operator.queue.api_mode == "rayquota"  # operatorConfiguration wins over kueueApi.enabled
    assert operator.multikueue is not None and operator.multikueue.dispatcher == "MostFreeQuota"
    assert operator.multikueue.namespace == "rayquota-system"


def test_an_unknown_key_in_operator_configuration_is_refused_by_the_operator(tmp_path: Path) -> None:
    objects = render("operatorConfiguration.waitForPodReady.timeout=5m")
    with pytest.raises(ConfigError, match=r"waitForPodReady: unknown key \(refused\)"):
        configuration_of(objects, tmp_path)


# Kueue's own Configuration as Kueue's chart takes it (managerConfig.controllerManagerConfigYaml):
# the keys of Kueue v0.19.2's default manager configuration, and a few behaviours set.
KUEUE_CONFIGURATION = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: :8443
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
controller:
  groupKindConcurrency:
    Job.batch: 5
    Workload.kueue.x-k8s.io: 10
clientConnection:
  qps: 300
  burst: 500
manageJobsWithoutQueueName: true
waitForPodsReady:
  timeout: 5m
  requeuingStrategy: {timestamp: Eviction, backoffLimitCount: 3}
fairSharing:
  preemptionStrategies: [LessThanInitialShare]
integrations:
  frameworks: [batch/job, ray.io/rayjob, ray.io/raycluster, pod]
"""


def _values_file(tmp_path: Path, kueue_configuration: str, kueue_api: bool = True) -> Path:
    path = tmp_path / "values.yaml"
    path.write_text(
        yaml.safe_dump({"kueueApi": {"enabled": kueue_api}, "kueueConfiguration": kueue_configuration})
    )
    return path


def _lease_names(objects: list[dict[str, Any]]) -> list[str]:
    [role] = find(objects, "Role", "rq-rayquota")
    return [
        name
        for rule in role["rules"]
        if "resourceNames" in rule and "leases" in rule["resources"]
        for name in rule["resourceNames"]
    ]


def test_kueues_own_configuration_is_rendered_unchanged_in_kueue_api_mode(tmp_path: Path) -> None:
    objects = render(files=(_values_file(tmp_path, KUEUE_CONFIGURATION),))
    loaded = configuration_of(objects, tmp_path)
    config = loaded.configuration
    assert config.apiVersion == "config.kueue.x-k8s.io/v1beta2"
    operator = build.settings(loaded).operator
    assert operator.queue.api_mode == "kueue"
    assert operator.queue.labels.manage_jobs_without_queue_name
    ready = operator.queue.wait_for_pods_ready
    assert ready is not None and (ready.timeout_s, ready.backoff_limit_count) == (300, 3)
    assert config.fairSharing is not None and config.fairSharing.preemptionStrategies == [
        "LessThanInitialShare"
    ]
    # The chart's wiring stays: its namespace, its webhook certificate, its address.
    assert config.namespace == "rayquota-system" and config.bindAddress == "0.0.0.0"
    assert config.internalCertManagement is not None
    assert config.internalCertManagement.webhookSecretName == "rq-rayquota-webhook-cert"
    # Kueue's Lease name is the one the Role grants.
    assert config.leaderElection.resourceName == "c1f6bfd2.kueue.x-k8s.io"
    assert _lease_names(objects) == ["c1f6bfd2.kueue.x-k8s.io"]
    warned = "\n".join(loaded.warnings)
    assert "clientConnection" in warned and "integrations.frameworks: pod" in warned


def test_the_lease_the_configuration_names_is_the_one_the_role_grants() -> None:
    assert _lease_names(render()) == ["rayquota-operator"]
    assert _lease_names(render("operatorConfiguration.leaderElection.resourceName=team-a")) == ["team-a"]


@pytest.mark.parametrize(
    ("text", "kueue_api", "message"),
    [
        (KUEUE_CONFIGURATION, False, r"kueueConfiguration: Kueue's Configuration needs Kueue-API mode"),
        (
            KUEUE_CONFIGURATION.replace("config.kueue.x-k8s.io/v1beta2", "config.kueue.x-k8s.io/v1beta1"),
            True,
            r'kueueConfiguration.apiVersion: "config.kueue.x-k8s.io/v1beta1": expected',
        ),
        (
            KUEUE_CONFIGURATION.replace("port: 9443", "port: 9444"),
            True,
            r'kueueConfiguration.webhook: \{"port":9444\} is the chart\'s to set '
            r'\(from its values: \{"port":9443\}',
        ),
        (
            KUEUE_CONFIGURATION + "internalCertManagement: {enable: false}\n",
            True,
            r'kueueConfiguration.internalCertManagement: \{"enable":false\} is the chart\'s to set',
        ),
        (
            KUEUE_CONFIGURATION + "namespace: kueue-system\n",
            True,
            r'kueueConfiguration.namespace: "kueue-system"',
        ),
        ("apiVersion: [", True, r"kueueConfiguration: not a YAML mapping"),
    ],
)
def test_kueue_configuration_the_chart_cannot_take_is_refused_naming_key_and_value(
    tmp_path: Path, text: str, kueue_api: bool, message: str
) -> None:
    result = template(files=(_values_file(tmp_path, text, kueue_api),))
    assert result.returncode != 0
    assert re.search(message, result.stderr), result.stderr


def test_kueues_device_class_mappings_open_the_claim_templates_to_the_operator(tmp_path: Path) -> None:
    mapping = "resources:\n  deviceClassMappings:\n  - {name: example.com/gpu, deviceClassNames: [gpu.x]}\n"
    objects = render(files=(_values_file(tmp_path, KUEUE_CONFIGURATION + mapping),))
    granted = {
        resource
        for role in find(objects, "ClusterRole")
        for rule in role["rules"]
        for resource in rule.get("resources", [])
    }
    assert "resourceclaimtemplates" in granted
    assert "resourceclaimtemplates" not in {
        resource
        for role in find(render(files=(_values_file(tmp_path, KUEUE_CONFIGURATION),)), "ClusterRole")
        for rule in role["rules"]
        for resource in rule.get("resources", [])
    }
