"""The chart renders rayquota's configuration file into a ConfigMap, mounts it and passes it with
--config; what it renders is a configuration the operator accepts."""

from __future__ import annotations

from pathlib import Path

import pytest

from rayquota.config import ConfigError, build, load
from tests.e2e.chart import configuration_of, find, render


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
