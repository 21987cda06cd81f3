from __future__ import annotations

import json
from pathlib import Path

import pytest

from rayquota.operator.ray.dashboard_api.resolver import (
    LocalResolver,
    ServiceDNSResolver,
    resolver_from_settings,
)
from tests.config_env import operator_config_from_env
from tests.unit.ray.fixtures import cluster


def test_service_dns_resolver() -> None:
    assert (
        ServiceDNSResolver().dashboard_url(cluster()) == "http://demo-head-svc.team-a.svc.cluster.local:8265"
    )
    body = cluster()
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "dashboard", "containerPort": 9000}
    ]
    assert ServiceDNSResolver().dashboard_url(body).endswith(":9000")


def test_local_resolver_precedence(tmp_path: Path) -> None:
    map_file = tmp_path / "map.json"
    resolver = LocalResolver(map_file, default_url="http://127.0.0.1:1")
    assert resolver.dashboard_url(cluster()) == "http://127.0.0.1:1"
    map_file.write_text(json.dumps({"*": "http://127.0.0.1:2", "team-a/*": "http://127.0.0.1:3"}))
    assert resolver.dashboard_url(cluster()) == "http://127.0.0.1:3"
    map_file.write_text(json.dumps({"team-a/demo": "http://127.0.0.1:4/", "team-a/*": "http://127.0.0.1:3"}))
    assert resolver.dashboard_url(cluster()) == "http://127.0.0.1:4"
    annotated = cluster()
    annotated["metadata"]["annotations"] = {"rayquota.io/dashboard-url": "http://127.0.0.1:5"}
    assert resolver.dashboard_url(annotated) == "http://127.0.0.1:5"


def test_local_resolver_without_mapping_says_how_to_fix() -> None:
    with pytest.raises(LookupError, match=r"rayquota\.io/dashboard-url"):
        LocalResolver().dashboard_url(cluster())


def test_config_from_env() -> None:
    config = operator_config_from_env(
        {
            "RAYQUOTA_OPERATOR_VERSION": "9.9",
            "RAYQUOTA_DASHBOARD_RESOLVER": "local",
            "RAYQUOTA_DASHBOARD_URL": "http://127.0.0.1:8265",
            "RAYQUOTA_RESYNC_INTERVAL": "2.5",
        }
    )
    assert (config.version, config.dashboard_resolver, config.resync_interval_s) == ("9.9", "local", 2.5)
    resolver = resolver_from_settings(
        config.dashboard_resolver, config.dashboard_map_file, config.dashboard_url
    )
    assert resolver.dashboard_url(cluster()) == "http://127.0.0.1:8265"
    with pytest.raises(ValueError, match="unknown dashboard resolver"):
        resolver_from_settings("nope", None, None)
