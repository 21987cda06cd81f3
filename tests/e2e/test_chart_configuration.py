"""The chart renders rayquota's configuration file into a ConfigMap, mounts it and passes it with
--config; what it renders is a configuration the operator accepts."""

from __future__ import annotations

from pathlib import Path

import yaml

from rayquota.config import build, load
from tests.e2e.chart import find, render


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


def test_the_default_configuration_is_the_header_alone() -> None:
    [config_map] = [c for c in find(render(), "ConfigMap") if c["metadata"]["name"].endswith("-config")]
    assert yaml.safe_load(config_map["data"]["config.yaml"]) == {
        "apiVersion": "config.rayquota.io/v1alpha1",
        "kind": "Configuration",
    }
