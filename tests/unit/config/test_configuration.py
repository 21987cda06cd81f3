"""The one configuration: loading, validation (every error names its key), precedence (flag >
environment override > file > default), Kueue's own Configuration YAML, misspelt variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from rayquota.config import ConfigError, build, load, render
from rayquota.config.loader import leaf_keys
from rayquota.config.model import Configuration
from rayquota.config.overrides import ENV_OVERRIDES
from rayquota.operator.queue.multikueue.settings import Dispatcher

RAYQUOTA_HEADER = "apiVersion: config.rayquota.io/v1alpha1\nkind: Configuration\n"
KUEUE_HEADER = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_defaults_without_a_file_match_the_operators_defaults() -> None:
    loaded = load()
    settings = build.settings(loaded)
    assert settings.operator.queue.wait_for_pods_ready is None
    assert settings.operator.multikueue is None and settings.operator.webhooks is None
    assert (settings.metrics_port, settings.health_port, settings.bind_address) == (8080, 8081, "127.0.0.1")
    assert settings.lease is not None and settings.lease.namespace == "default"
    assert all(source == "default" for source in map(loaded.source_of, ("namespace", "queue.api")))


def test_a_file_with_kueue_names_sets_the_runtime_settings(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        RAYQUOTA_HEADER
        + "namespace: ops\nmanageJobsWithoutQueueName: true\n"
        + "waitForPodsReady:\n  timeout: 5m\n  blockAdmission: true\n"
        + "  requeuingStrategy: {timestamp: Creation, backoffLimitCount: 3, backoffBaseSeconds: 10}\n"
        + "fairSharing: {}\n"
        + "multiKueue: {enable: true, dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-all-at-once}\n"
        + "leaderElection: {leaseDuration: 30s}\n",
    )
    loaded = load(path)
    operator = build.operator_config(loaded.configuration)
    ready = operator.queue.wait_for_pods_ready
    assert ready is not None and ready.timeout_s == 300 and ready.block_admission
    assert ready.backoff_limit_count == 3 and ready.backoff_base_s == 10
    assert operator.queue.fair_sharing and operator.queue.labels.manage_jobs_without_queue_name
    assert operator.multikueue is not None and operator.multikueue.dispatcher is Dispatcher.ALL_AT_ONCE
    assert operator.multikueue.namespace == "ops"
    lease = build.lease(loaded.configuration)
    assert lease is not None and (lease.namespace, lease.duration_s) == ("ops", 30)
    assert loaded.source_of("waitForPodsReady.timeout") == f"file {path}"


def test_a_flag_beats_the_environment_which_beats_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, RAYQUOTA_HEADER + "waitForPodsReady: {timeout: 100}\ncontroller: {workers: 2}\n")
    env = {"RAYQUOTA_PODS_READY_TIMEOUT": "200", "RAYQUOTA_WORKERS": "3"}
    loaded = load(path, env, {"waitForPodsReady.timeout": ("--pods-ready-timeout", 300.0)})
    assert loaded.configuration.waitForPodsReady is not None
    assert loaded.configuration.waitForPodsReady.timeout == 300
    assert loaded.configuration.controller.workers == 3
    assert loaded.source_of("waitForPodsReady.timeout") == "flag --pods-ready-timeout"
    assert loaded.source_of("controller.workers") == "env RAYQUOTA_WORKERS"
    printed = render(loaded)
    assert "controller.workers: 3  # env RAYQUOTA_WORKERS" in printed
    assert "waitForPodsReady.requeuingStrategy.backoffMaxSeconds: 3600.0  # default" in printed


def test_sub_keys_alone_never_switch_a_section_on() -> None:
    assert load(env={"RAYQUOTA_PODS_READY_TIMEOUT": "20"}).configuration.waitForPodsReady is not None
    assert (
        build.operator_config(
            load(env={"RAYQUOTA_PODS_READY_TIMEOUT": "20"}).configuration
        ).queue.wait_for_pods_ready
        is None
    )
    on = load(env={"RAYQUOTA_PODS_READY_TIMEOUT": "20", "RAYQUOTA_WAIT_FOR_PODS_READY": "true"})
    ready = build.operator_config(on.configuration).queue.wait_for_pods_ready
    assert ready is not None and ready.timeout_s == 20


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("waitForPodsReady: {timeout: soon}\n", r"waitForPodsReady.timeout: .*expected a duration"),
        ("waitForPodsReady: {timout: 5m}\n", r"waitForPodsReady.timout: unknown key \(refused\)"),
        ("surprise: 1\n", r"surprise: unknown key \(refused\)"),
        ("controller: {workers: 0}\n", r"controller.workers: .*greater than or equal to 1"),
        ("queue: {api: kueu}\n", r"queue.api: Input should be 'rayquota' or 'kueue'"),
        ("webhook: {port: 9443}\n", r"webhook.port \(RAYQUOTA_WEBHOOK_LISTEN_PORT\) needs a certificate"),
        ("metrics: {bindAddress: 'x:y'}\n", r"metrics.bindAddress: expected an address"),
    ],
)
def test_every_error_names_its_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build.settings(load(write(tmp_path, RAYQUOTA_HEADER + text)))


def test_a_file_without_its_kind_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="apiVersion: required"):
        load(write(tmp_path, "namespace: x\n"))
    with pytest.raises(ConfigError, match="kind: Input should be 'Configuration'"):
        load(write(tmp_path, "apiVersion: config.rayquota.io/v1alpha1\nkind: Config\n"))


def test_kueues_own_configuration_is_read_unchanged(tmp_path: Path) -> None:
    # The shape of Kueue's chart's default configuration (Kueue v0.19.2 keys).
    text = KUEUE_HEADER + (
        "health: {healthProbeBindAddress: ':8081'}\n"
        "metrics: {bindAddress: ':8443'}\n"
        "webhook: {port: 9443}\n"
        "leaderElection: {leaderElect: true, resourceName: c1f6bfd2.kueue.x-k8s.io}\n"
        "controller: {groupKindConcurrency: {Job.batch: 5, Workload.kueue.x-k8s.io: 5}}\n"
        "clientConnection: {qps: 50, burst: 100}\n"
        "waitForPodsReady: {timeout: 10m, blockAdmission: false}\n"
        "integrations: {frameworks: [batch/job, kubeflow.org/mpijob, ray.io/rayjob, ray.io/raycluster]}\n"
        "internalCertManagement: {enable: true, webhookServiceName: kueue-webhook-service, "
        "webhookSecretName: kueue-webhook-server-cert, hosts: [kueue-webhook-service.kueue-system.svc]}\n"
    )
    loaded = load(write(tmp_path, text))
    settings = build.settings(loaded)
    assert settings.operator.queue.api_mode == "kueue"
    assert loaded.source_of("queue.api") == "apiVersion config.kueue.x-k8s.io/v1beta2"
    assert settings.metrics_port == 8443 and settings.operator.webhooks is not None
    assert settings.operator.webhooks.port == 9443 and settings.operator.webhooks.keeper is not None
    ready = settings.operator.queue.wait_for_pods_ready
    assert ready is not None and ready.timeout_s == 600
    assert settings.lease is not None and settings.lease.name == "c1f6bfd2.kueue.x-k8s.io"
    warned = "\n".join(loaded.warnings)
    for key in ("clientConnection", "controller.groupKindConcurrency", "kubeflow.org/mpijob"):
        assert key in warned


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "admissionFairSharing: {usageHalfLifeTime: 1h, resourceWeights: {cpu: -1}}\n",
            "admissionFairSharing.resourceWeights.cpu",
        ),
        (
            "resources: {excludeResourcePrefixes: [example.com/]}\n",
            r"resources.excludeResourcePrefixes: \['example.com/'\] not supported",
        ),
        ("tls: {minVersion: VersionTLS13}\n", r"tls: \{'minVersion': 'VersionTLS13'\} not supported"),
        (
            "fairSharing: {preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]}\n",
            "fairSharing.preemptionStrategies",
        ),
        (
            "manageJobsWithoutQueueName: true\nmanagedJobsNamespaceSelector: {}\n",
            "managedJobsNamespaceSelector",
        ),
        ("integrations: {labelKeysToCopy: [team]}\n", "integrations.labelKeysToCopy"),
    ],
)
def test_kueue_settings_rayquota_lacks_are_refused_by_name(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(write(tmp_path, KUEUE_HEADER + text))


def test_a_misspelt_variable_is_reported_with_the_nearest_name() -> None:
    loaded = load(
        env={"RAYQUOTA_PODS_READY_TIMEOUTS": "20", "RAYQUOTA_TEST_X": "1", "RAYQUOTA_STATE_DIR": "/x"}
    )
    assert loaded.warnings == [
        "environment variable RAYQUOTA_PODS_READY_TIMEOUTS is not a rayquota setting and is ignored; "
        "did you mean RAYQUOTA_PODS_READY_TIMEOUT?"
    ]


def test_kuberays_settings_rayquota_cannot_honour_are_refused() -> None:
    with pytest.raises(ConfigError, match="ENABLE_ZERO_DOWNTIME='false'"):
        load(env={"ENABLE_ZERO_DOWNTIME": "false"})


def _every_section() -> Configuration:
    """A configuration with each optional section present (so every key is there to list)."""
    sections = (
        "waitForPodsReady",
        "fairSharing",
        "admissionFairSharing",
        "multiKueue",
        "internalCertManagement",
        "resources",
    )
    every = {key: {} for key in sections}
    return Configuration.model_validate({**every, "metrics": {"localQueueMetrics": {}}})


def test_every_override_names_a_key_of_the_model() -> None:
    every_section = _every_section()
    keys = set(leaf_keys(every_section.model_dump()))
    assert [o.key for o in ENV_OVERRIDES if o.key not in keys] == []
    assert len({o.variable for o in ENV_OVERRIDES}) == len(ENV_OVERRIDES)


DOCS = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_the_docs_list_every_key_and_every_override() -> None:
    text = DOCS.read_text()
    every_section = _every_section()
    missing = [key for key in leaf_keys(every_section.model_dump()) if f"| `{key}` |" not in text]
    missing += [o.variable for o in ENV_OVERRIDES if f"`{o.variable}`" not in text]
    assert missing == []


def test_the_docs_example_file_loads(tmp_path: Path) -> None:
    example = DOCS.read_text().split("```yaml\n", 1)[1].split("```", 1)[0]
    loaded = load(write(tmp_path, example))
    assert build.settings(loaded).operator.queue.wait_for_pods_ready is not None
    assert loaded.warnings == []


def test_fair_sharing_strategies_reach_the_engine_from_the_file_and_the_environment(tmp_path: Path) -> None:
    from rayquota.queueing.quota.fairsharing import FairSharing, PreemptionStrategy

    path = write(tmp_path, RAYQUOTA_HEADER + "fairSharing: {preemptionStrategies: [LessThanInitialShare]}\n")
    fair = build.operator_config(load(path).configuration).queue.fair_sharing
    assert isinstance(fair, FairSharing)
    assert fair.preemption_strategies == (PreemptionStrategy.LESS_THAN_INITIAL_SHARE,)
    env = {
        "RAYQUOTA_FAIR_SHARING": "true",
        "RAYQUOTA_FAIR_SHARING_PREEMPTION_STRATEGIES": "LessThanOrEqualToFinalShare",
    }
    fair = build.operator_config(load(env=env).configuration).queue.fair_sharing
    assert isinstance(fair, FairSharing)
    assert fair.preemption_strategies == (PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,)
    assert build.operator_config(load().configuration).queue.fair_sharing is False


def test_admission_fair_sharing_reaches_the_engine_with_kueue_names(tmp_path: Path) -> None:
    text = (
        "admissionFairSharing:\n"
        "  usageHalfLifeTime: 1h\n"
        "  usageSamplingInterval: 30s\n"
        "  resourceWeights: {nvidia.com/gpu: 2, cpu: 0}\n"
    )
    afs = build.operator_config(load(write(tmp_path, RAYQUOTA_HEADER + text)).configuration).queue
    assert afs.admission_fair_sharing is not None
    assert afs.admission_fair_sharing.usage_half_life_time == 3600
    assert afs.admission_fair_sharing.usage_sampling_interval == 30
    assert dict(afs.admission_fair_sharing.resource_weights) == {"nvidia.com/gpu": 2, "cpu": 0}
    off = RAYQUOTA_HEADER + text + "featureGates: {AdmissionFairSharing: false}\n"
    queue = build.operator_config(load(write(tmp_path, off)).configuration).queue
    assert queue.admission_fair_sharing is None


def test_kueues_incremental_dispatcher_and_its_step_size(tmp_path: Path) -> None:
    text = RAYQUOTA_HEADER + (
        "multiKueue: {enable: true, dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental,\n"
        "  incrementalDispatcherConfig: {stepSize: 2}, incrementalRoundTimeout: 30}\n"
    )
    multikueue = build.operator_config(load(write(tmp_path, text)).configuration).multikueue
    assert multikueue is not None
    assert multikueue.dispatcher is Dispatcher.INCREMENTAL
    assert (multikueue.incremental_step, multikueue.incremental_round_s) == (2, 30.0)
    with pytest.raises(ConfigError, match="stepSize"):
        load(write(tmp_path, RAYQUOTA_HEADER + "multiKueue: {incrementalDispatcherConfig: {stepSize: 0}}\n"))
