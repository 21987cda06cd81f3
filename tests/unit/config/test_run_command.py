"""`rayquota run --config FILE --print-config`: the effective configuration with each value's
source, and a refused configuration stopping the command with the key named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rayquota import cli


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in [n for n in os.environ if n.startswith("RAYQUOTA_") or n == "CLUSTER_DOMAIN"]:
        monkeypatch.delenv(name)
    return monkeypatch


def test_print_config_names_the_source_of_each_value(
    tmp_path: Path, clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: config.rayquota.io/v1alpha1\nkind: Configuration\nwaitForPodsReady: {timeout: 2m}\n"
    )
    clean_env.setenv("RAYQUOTA_WORKERS", "3")
    clean_env.setenv("RAYQUOTA_WORKRES", "4")
    code = cli.main(["run", "--config", str(config), "--print-config", "--lease-duration", "6"])
    out = capsys.readouterr().out
    assert code == 0
    assert f"waitForPodsReady.timeout: 120.0  # file {config}" in out
    assert "controller.workers: 3  # env RAYQUOTA_WORKERS" in out
    assert "leaderElection.leaseDuration: 6.0  # flag --lease-duration" in out
    assert 'metrics.bindAddress: ":8080"  # default' in out
    assert "# warning: environment variable RAYQUOTA_WORKRES is not a rayquota setting" in out


def test_a_refused_configuration_stops_the_command_naming_the_key(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: config.rayquota.io/v1alpha1\nkind: Configuration\nqueue: {labels: [x]}\n")
    with pytest.raises(SystemExit, match=r"queue.labels: unknown key \(refused\)"):
        cli.main(["run", "--config", str(config), "--print-config"])
    clean_env.setenv("RAYQUOTA_PODS_READY_TIMEOUT", "soon")
    with pytest.raises(SystemExit, match=r"RAYQUOTA_PODS_READY_TIMEOUT='soon'"):
        cli.main(["run", "--print-config"])
