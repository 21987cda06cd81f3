"""The Prometheus HTTP API answers the History reads (the query_range JSON as the API documents
it); the real server is in tests/integration/dashboard/test_history_prometheus.py."""

from __future__ import annotations

import pytest

from rayquota.dashboard.prometheus_history import PrometheusError, parse_matrix, usage_query
from tests.config_env import dashboard_from_env


def test_a_matrix_becomes_values_per_cluster_queue_and_step() -> None:
    answer = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": {"cluster_queue": "team-a"}, "values": [[100, "3"], [101.5, "4"]]},
                {"metric": {}, "values": [[100, "9"]]},  # no queue label: not a queue's series
            ],
        },
    }
    assert parse_matrix(answer) == {"team-a": {100.0: 3.0, 101.5: 4.0}}


def test_an_error_answer_is_named() -> None:
    answer = {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}
    with pytest.raises(PrometheusError, match="bad_data: parse error at char 3"):
        parse_matrix(answer)
    with pytest.raises(PrometheusError, match="expected a matrix, got resultType 'vector'"):
        parse_matrix({"status": "success", "data": {"resultType": "vector", "result": []}})


def test_the_resource_is_a_quoted_label_value() -> None:
    query = usage_query('gpu"} or vector(1)')
    assert 'resource="gpu\\"} or vector(1)"' in query


def test_the_url_is_checked_by_name() -> None:
    from rayquota.dashboard.settings import checked_prometheus_url

    assert checked_prometheus_url(" http://prom:9090/ ", "--prometheus-url") == "http://prom:9090"
    assert checked_prometheus_url("", "--prometheus-url") is None
    with pytest.raises(ValueError, match="--prometheus-url='prom:9090': expected the base URL"):
        checked_prometheus_url("prom:9090", "--prometheus-url")
    env = {"RAYQUOTA_DASHBOARD_PORT": "8090", "RAYQUOTA_DASHBOARD_PROMETHEUS_URL": "http://p:9090?x=1"}
    with pytest.raises(ValueError, match="prometheusUrl \\(RAYQUOTA_DASHBOARD_PROMETHEUS_URL\\)='http://p:9090\\?x=1'"):
        dashboard_from_env(env)
