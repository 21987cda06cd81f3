"""Kueue's own Configuration (v0.19.2, config.kueue.x-k8s.io/v1beta2) is read unchanged: every key
Kueue has is known to rayquota (honoured, refused by name or accepted with a warning, never refused
as an unknown key), and every refusal names the key and the value it was given."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rayquota.config import ConfigError, Loaded, load

KUEUE_HEADER = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"

# One sample of each of Kueue v0.19.2's Configuration keys (facts of Kueue's API, as Kueue's
# configuration_types.go names them), each a file of its own.
KUEUE_KEYS = {
    "namespace": "namespace: kueue-system",
    "manageJobsWithoutQueueName": "manageJobsWithoutQueueName: false",
    "managedJobsNamespaceSelector": "managedJobsNamespaceSelector: {matchLabels: {a: b}}",
    "internalCertManagement": (
        "internalCertManagement: {enable: false, webhookServiceName: s, webhookSecretName: c}"
    ),
    "waitForPodsReady": (
        "waitForPodsReady: {timeout: 5m, blockAdmission: true, recoveryTimeout: 3m, requeuingStrategy: "
        "{timestamp: Eviction, backoffLimitCount: null, backoffBaseSeconds: 60, backoffMaxSeconds: 3600}}"
    ),
    "clientConnection": "clientConnection: {qps: 300, burst: 500}",
    "integrations": "integrations: {frameworks: [batch/job, ray.io/rayjob, pod]}",
    "integrations.externalFrameworks": "integrations: {externalFrameworks: [Foo.v1.example.com]}",
    "integrations.labelKeysToCopy": "integrations: {labelKeysToCopy: [team]}",
    "multiKueue": (
        "multiKueue: {gcInterval: 1m, origin: o, workerLostTimeout: 15m, "
        "dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-all-at-once}"
    ),
    "multiKueue.externalFrameworks": "multiKueue: {externalFrameworks: [{name: Foo.v1.example.com}]}",
    "multiKueue.clusterProfile": "multiKueue: {clusterProfile: {credentialsProviders: []}}",
    "multiKueue.incrementalDispatcherConfig": "multiKueue: {incrementalDispatcherConfig: {stepSize: 2}}",
    "fairSharing": (
        "fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}"
    ),
    "admissionFairSharing": (
        "admissionFairSharing: {usageHalfLifeTime: 168h, usageSamplingInterval: 5m, "
        "resourceWeights: {cpu: 0}}"
    ),
    "resources.deviceClassMappings": (
        "resources: {deviceClassMappings: [{name: example.com/gpu, deviceClassNames: [gpu.example.com]}]}"
    ),
    "resources.excludeResourcePrefixes": "resources: {excludeResourcePrefixes: [example.com/]}",
    "resources.quotaCheckStrategy": "resources: {quotaCheckStrategy: BlockUndeclared}",
    "resources.transformations": (
        "resources: {transformations: [{input: nvidia.com/mig-4g.5gb, strategy: Replace}]}"
    ),
    "featureGates": "featureGates: {TopologyAwareScheduling: true}",
    "objectRetentionPolicies": "objectRetentionPolicies: {workloads: {afterFinished: 1h}}",
    "visibilityServer": "visibilityServer: {bindAddress: 0.0.0.0, bindPort: 8082}",
    "webhook": "webhook: {port: 9443, host: 0.0.0.0, certDir: /tmp/k8s-webhook-server/serving-certs}",
    "leaderElection": (
        "leaderElection: {leaderElect: true, resourceName: c1f6bfd2.kueue.x-k8s.io, "
        "resourceNamespace: kueue-system, leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s, "
        "resourceLock: leases}"
    ),
    "metrics": "metrics: {bindAddress: ':8443', enableClusterQueueResources: true}",
    "metrics.customLabels": "metrics: {customLabels: [{name: team, sourceLabelKey: example.com/team}]}",
    "metrics.localQueueMetrics": (
        "metrics: {localQueueMetrics: {enable: true, localQueueSelector: {matchLabels: {a: b}}}}"
    ),
    "health": (
        "health: {healthProbeBindAddress: ':8081', readinessEndpointName: readyz, "
        "livenessEndpointName: healthz}"
    ),
    "pprofBindAddress": "pprofBindAddress: ':8083'",
    "controller": "controller: {groupKindConcurrency: {Job.batch: 5}, cacheSyncTimeout: 2m}",
    "tls": "tls: {minVersion: VersionTLS13, cipherSuites: [TLS_AES_128_GCM_SHA256]}",
}


def _outcome(tmp_path: Path, text: str) -> str:
    """ "" when the file loads (with its warnings), else the refusal."""
    try:
        loaded = load_text(tmp_path, text)
    except ConfigError as error:
        return str(error)
    return "\n".join(loaded.warnings)


@pytest.mark.parametrize("key", sorted(KUEUE_KEYS))
def test_every_kueue_key_is_known(tmp_path: Path, key: str) -> None:
    assert "unknown key" not in _outcome(tmp_path, KUEUE_KEYS[key])


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (
            "metrics.customLabels",
            r"metrics.customLabels: \[\{'name': 'team', 'sourceLabelKey': 'example.com/team'\}\] "
            r"not supported",
        ),
        (
            "multiKueue.externalFrameworks",
            r"multiKueue.externalFrameworks: \[\{'name': 'Foo.v1.example.com'\}\] not supported",
        ),
        (
            "multiKueue.clusterProfile",
            r"multiKueue.clusterProfile: \{'credentialsProviders': \[\]\} not supported",
        ),
        ("tls", r"tls: \{'minVersion': 'VersionTLS13', .*\} not supported"),
        (
            "objectRetentionPolicies",
            r"objectRetentionPolicies: \{'workloads': \{'afterFinished': '1h'\}\} not supported",
        ),
        ("resources.quotaCheckStrategy", r"resources.quotaCheckStrategy: 'BlockUndeclared' not supported"),
    ],
)
def test_a_kueue_key_rayquota_lacks_is_refused_naming_key_and_value(
    tmp_path: Path, key: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_text(tmp_path, KUEUE_KEYS[key])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "tls: {minVersion: VersionTLS13, curvePreferences: [x]}",
            r"tls.curvePreferences.0: .*valid integer.*; got 'x'",
        ),
        (
            "objectRetentionPolicies: {workloads: {afterFinished: soon}}",
            r"objectRetentionPolicies.workloads.afterFinished: .*expected a duration.*; got 'soon'",
        ),
        (
            "resources: {quotaCheckStrategy: Sometimes}",
            r"resources.quotaCheckStrategy: Input should be 'BlockUndeclared' or 'IgnoreUndeclared'; "
            r"got 'Sometimes'",
        ),
        ("resources: {excludeResourcePrefix: [a/]}", r"resources.excludeResourcePrefix: unknown key"),
        (
            "multiKueue: {externalFrameworks: [Foo.v1.example.com]}",
            r"multiKueue.externalFrameworks.0: .*; got 'Foo.v1.example.com'",
        ),
        (
            "multiKueue: {clusterProfile: {accessProviders: [{name: p, execConfig: {command: c, "
            "interactiveMode: Maybe}}]}}",
            r"multiKueue.clusterProfile.accessProviders.0.execConfig.interactiveMode: .*; got 'Maybe'",
        ),
        (
            "metrics: {customLabels: [{name: team, sourceKind: Pod}]}",
            r"metrics.customLabels.0.sourceKind: .*'Workload'; got 'Pod'",
        ),
        (
            "managedJobsNamespaceSelector: {matchExpressions: [{key: a, operator: Has}]}",
            r"managedJobsNamespaceSelector.matchExpressions.0.operator: .*; got 'Has'",
        ),
        ("visibilityServer: {bindPort: 70000}", r"visibilityServer.bindPort: .*65535; got 70000"),
    ],
)
def test_a_kueue_key_of_the_wrong_shape_is_refused_naming_key_and_value(
    tmp_path: Path, text: str, message: str
) -> None:
    """Typed as Kueue types them, the keys rayquota does not implement refuse a wrong shape as
    such (not as "not supported", which would suggest the value was understood)."""
    with pytest.raises(ConfigError, match=message):
        load_text(tmp_path, text)


def test_a_refusal_quotes_the_value_as_written(tmp_path: Path) -> None:
    text = (
        "resources: {transformations: [{input: nvidia.com/mig-4g.5gb, strategy: Replace, "
        "outputs: {cpu: 1, memory: 1Gi}}]}"
    )
    with pytest.raises(
        ConfigError,
        match=r"resources.transformations: \[\{'input': 'nvidia.com/mig-4g.5gb', 'strategy': 'Replace', "
        r"'outputs': \{'cpu': 1, 'memory': '1Gi'\}\}\] not supported",
    ):
        load_text(tmp_path, text)
    with pytest.raises(
        ConfigError, match=r"managedJobsNamespaceSelector: \{'matchLabels': \{'a': 'b'\}\} not"
    ):
        load_text(
            tmp_path, "manageJobsWithoutQueueName: true\nmanagedJobsNamespaceSelector: {matchLabels: {a: b}}"
        )


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("metrics.localQueueMetrics", r"metrics.localQueueMetrics: .*'localQueueSelector'.* ignored"),
        ("pprofBindAddress", r"pprofBindAddress: ':8083': Kueue's setting, ignored"),
    ],
)
def test_a_harmless_kueue_key_is_accepted_with_a_warning_naming_its_value(
    tmp_path: Path, key: str, message: str
) -> None:
    assert any(re.search(message, w) for w in load_text(tmp_path, KUEUE_KEYS[key]).warnings)


def test_kueues_incremental_dispatcher_and_its_config_are_read(tmp_path: Path) -> None:
    text = (
        "multiKueue: {dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental,"
        " incrementalDispatcherConfig: {stepSize: 2}}"
    )
    loaded = load_text(tmp_path, text)
    multikueue = loaded.configuration.multiKueue
    assert multikueue is not None and multikueue.dispatcherName.value == "Incremental"
    assert multikueue.incrementalDispatcherConfig.stepSize == 2
    assert not any("incremental" in w.lower() for w in loaded.warnings)


def test_an_unknown_key_is_refused_naming_its_value(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"waitForPodsReady.timout: unknown key \(refused\); got '5m' \(from file "
    ):
        load_text(tmp_path, "waitForPodsReady: {timout: 5m}")
    with pytest.raises(
        ConfigError, match=r"metrics.localQueueMetrics.selector: unknown key \(refused\); got 'x'"
    ):
        load_text(tmp_path, "metrics: {localQueueMetrics: {selector: x}}")


def load_text(tmp_path: Path, text: str) -> Loaded:
    path = tmp_path / "config.yaml"
    path.write_text(KUEUE_HEADER + text + "\n")
    return load(path)
