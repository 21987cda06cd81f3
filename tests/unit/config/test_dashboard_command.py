"""`rayquota dashboard` reads the operator's configuration as `rayquota run` does (the file with
--config, the environment overrides): queue.api, fairSharing and dashboard.prometheusUrl reach the
dashboard; it reads no variable of its own."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rayquota import cli
from rayquota.dashboard import main as dashboard_main
from rayquota.queueing.quota.fairsharing import FairSharing


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    for name in [n for n in os.environ if n.startswith("RAYQUOTA_")]:
        monkeypatch.delenv(name)
    given: dict[str, Any] = {}

    def run(**kwargs: Any) -> int:
        given.update(kwargs)
        return 0

    monkeypatch.setattr(dashboard_main, "run", run)
    return given


def test_the_dashboard_takes_the_queue_api_and_fair_sharing_from_the_configuration(
    tmp_path: Path, started: dict[str, Any]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "fairSharing: {preemptionStrategies: [LessThanInitialShare]}\n"
    )
    assert cli.main(["dashboard", "--config", str(config), "--port", "0"]) == 0
    assert started["api"].workloads.group == "kueue.x-k8s.io"
    assert started["fair_sharing"] == FairSharing.parse(["LessThanInitialShare"])
    assert started["settings"].prometheus_url is None


def test_the_environment_overrides_reach_the_dashboard(
    started: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAYQUOTA_QUEUE_API", "kueue")
    monkeypatch.setenv("RAYQUOTA_DASHBOARD_PROMETHEUS_URL", "http://prometheus:9090/")
    assert cli.main(["dashboard", "--port", "0"]) == 0
    assert started["api"].workloads.group == "kueue.x-k8s.io"
    assert started["fair_sharing"] is False
    assert started["settings"].prometheus_url == "http://prometheus:9090"
    # The flag wins over the configuration.
    assert cli.main(["dashboard", "--port", "0", "--prometheus-url", "http://other:9090"]) == 0
    assert started["settings"].prometheus_url == "http://other:9090"


def test_a_refused_configuration_stops_the_dashboard_naming_the_key(
    tmp_path: Path, started: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: config.rayquota.io/v1alpha1\nkind: Configuration\nqueue: {api: kueu}\n")
    assert cli.main(["dashboard", "--config", str(config), "--port", "0"]) == 2
    assert "queue.api: Input should be 'rayquota' or 'kueue'; got 'kueu'" in capsys.readouterr().err
    assert started == {}
