"""HTTP-level rules of the dashboard against the real API server: 401 without a token or with
one the API server rejects, answers cut to what the user may list (a viewer of namespace
team-a only), the live channel's Origin check, GET only, and the security headers."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.integration.dashboard.support import (
    Served,
    delete_cluster_rbac,
    get,
    role_and_binding,
    viewer_token,
)
from tests.integration.queue.conftest import Quota
from tests.polling import wait_for

TEAM_A_RULES = [
    {
        "apiGroups": ["rayquota.io"],
        "resources": ["workloads", "localqueues"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": ["ray.io"], "resources": ["rayjobs", "rayclusters", "rayservices"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["list"]},
]


def workload(namespace: str, name: str, queue: str, created_by: str) -> dict[str, Any]:
    return {
        "apiVersion": "rayquota.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "labels": {"test": created_by}},
        "spec": {
            "queueName": queue,
            "podSets": [{"name": "gpu", "count": 1, "requests": {"nvidia.com/gpu": "1"}}],
        },
    }


def rayjob(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"entrypoint": "true", "suspend": True, "clusterSelector": {"ray.io/cluster": "none"}},
    }


@pytest.fixture
def team_b(control_plane: Any, namespace: str) -> Iterator[str]:
    name = f"{namespace}-b"[:63]
    control_plane.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def two_teams(control_plane: Any, namespace: str, team_b: str, quota: Quota) -> dict[str, str]:
    """A StrictFIFO ClusterQueue with no GPUs shared by LocalQueue ``lq`` of both namespaces;
    team-b's Workload first in line, team-a's behind it; a RayJob in each namespace."""
    cq = quota.cluster_queue("strict", {quota.flavor("a100", "a100"): 0}, queueingStrategy="StrictFIFO")
    quota.local_queue("lq", cq)
    documents = [
        {
            "apiVersion": "rayquota.io/v1alpha1",
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": team_b},
            "spec": {"clusterQueue": cq},
        },
        workload(team_b, "wl-b", "lq", "b"),
    ]
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))
    control_plane.kubectl(
        "apply", "-f", "-", input=yaml.safe_dump_all([workload(namespace, "wl-a", "lq", "a")])
    )
    control_plane.kubectl(
        "apply", "-f", "-", input=yaml.safe_dump_all([rayjob(namespace, "job-a"), rayjob(team_b, "job-b")])
    )
    return {"cq": cq, "a": namespace, "b": team_b}


@pytest.fixture
def team_a_token(control_plane: Any, namespace: str) -> Iterator[str]:
    """May list Workloads, LocalQueues, Ray objects, pods and events in team-a's namespace only,
    and ClusterQueues (cluster-scoped) to see its queue's order."""
    token = viewer_token(control_plane, namespace, "team-a", TEAM_A_RULES)
    name = f"{namespace}-team-a-cq"
    rules = [{"apiGroups": ["rayquota.io"], "resources": ["clusterqueues"], "verbs": ["list"]}]
    documents = role_and_binding(name, rules, (namespace, "team-a"))
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))
    try:
        yield token
    finally:
        delete_cluster_rbac(control_plane, name)


def order(dashboard: Served, token: str, cq: str) -> list[dict[str, Any]]:
    status, _, body = get(f"{dashboard.url}/api/queues/{cq}", token)
    return list(body["pending"]["items"]) if status == 200 else []


def test_no_token_or_a_rejected_token_is_401(dashboard: Served) -> None:
    for headers in (
        {},
        {"Authorization": "Bearer not-a-real-token"},
        {"Authorization": "Basic dXNlcjpwdw=="},
    ):
        status, got, body = get(f"{dashboard.url}/api/cohorts", headers=headers)
        assert status == 401, headers
        assert got["WWW-Authenticate"].startswith("Bearer")
        assert "token" in body["error"]
    status, _, _ = get(f"{dashboard.url}/api/live?view=/api/cohorts")
    assert status == 401


def test_only_get_exists(dashboard: Served, admin_token: str) -> None:
    assert get(f"{dashboard.url}/api/cohorts", admin_token)[0] == 200
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        for path in ("/api/cohorts", "/api/workloads/x/y", "/"):
            status, _, _ = get(f"{dashboard.url}{path}", admin_token, method=method)
            assert status == 405, (method, path)


def test_security_headers_and_no_inline_script(dashboard: Served, admin_token: str) -> None:
    for path, token in (
        ("/", None),
        ("/queues/x", None),
        ("/static/app.js", None),
        ("/api/cohorts", admin_token),
    ):
        status, got, _ = get(f"{dashboard.url}{path}", token)
        assert status == 200, path
        csp = got["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
        assert got["X-Frame-Options"] == "DENY"
        assert got["X-Content-Type-Options"] == "nosniff"
        assert got["Referrer-Policy"] == "no-referrer"
        assert got["Cache-Control"] == "no-store"
    _, _, index = get(f"{dashboard.url}/")
    assert not re.search(r"<script(?![^>]*\bsrc=)", index), "inline script in index.html"
    assert not re.search(r"\sstyle=|\son[a-z]+=", index), "inline style or handler in index.html"


def first_event(dashboard: Served, token: str, origin: str | None) -> tuple[int, dict[str, Any] | None]:
    connection = http.client.HTTPConnection("127.0.0.1", dashboard.port, timeout=30)
    headers = {"Authorization": f"Bearer {token}"}
    if origin is not None:
        headers["Origin"] = origin
    try:
        connection.request("GET", "/api/live?view=/api/whoami", headers=headers)
        response = connection.getresponse()
        if response.status != 200:
            return response.status, None
        lines = []
        while not (lines and lines[-1] == b"\n"):
            lines.append(response.fp.readline())
        data = b"".join(line[5:] for line in lines if line.startswith(b"data:"))
        return 200, json.loads(data)
    finally:
        connection.close()


def test_live_channel_checks_the_origin(dashboard: Served, admin_token: str) -> None:
    status, message = first_event(dashboard, admin_token, f"http://127.0.0.1:{dashboard.port}")
    assert status == 200 and message is not None and message["body"]["user"].endswith(":viewer")
    assert first_event(dashboard, admin_token, None)[0] == 200  # same-origin GETs carry no Origin
    for foreign in ("http://evil.example", f"http://127.0.0.1:{dashboard.port + 1}", "null"):
        assert first_event(dashboard, admin_token, foreign)[0] == 403, foreign


def test_a_team_a_viewer_sees_only_team_a(
    dashboard: Served, two_teams: dict[str, str], team_a_token: str, admin_token: str
) -> None:
    cq, team_a, team_b = two_teams["cq"], two_teams["a"], two_teams["b"]
    admin_rows = wait_for(
        "both workloads in the queue order",
        lambda: len(order(dashboard, admin_token, cq)) == 2 and order(dashboard, admin_token, cq),
    )
    assert [(r["namespace"], r["name"]) for r in admin_rows] == [(team_b, "wl-b"), (team_a, "wl-a")]
    assert f"{team_b}/wl-b" in admin_rows[1]["reason"]  # StrictFIFO: team-a waits behind team-b

    rows = order(dashboard, team_a_token, cq)
    assert [r["position"] for r in rows] == [1, 2]
    assert rows[0]["hidden"] is True and "namespace" not in rows[0] and "wl-b" not in json.dumps(rows[0])
    assert rows[1]["hidden"] is False and rows[1]["name"] == "wl-a"
    assert (
        team_b not in rows[1]["reason"] and "a workload in a namespace you cannot list" in rows[1]["reason"]
    )

    assert get(f"{dashboard.url}/api/workloads/{team_a}/wl-a", team_a_token)[0] == 200
    status, _, body = get(f"{dashboard.url}/api/workloads/{team_b}/wl-b", team_a_token)
    assert status == 403 and "may not list" in body["error"]
    assert get(f"{dashboard.url}/api/localqueues/{team_b}/lq", team_a_token)[0] == 403

    _, _, ray = get(f"{dashboard.url}/api/ray", team_a_token)
    assert {(o["namespace"], o["name"]) for o in ray["objects"]} == {(team_a, "job-a")}
    _, _, ray = get(f"{dashboard.url}/api/ray", admin_token)
    names = {(o["namespace"], o["name"]) for o in ray["objects"]}
    assert {(team_a, "job-a"), (team_b, "job-b")} <= names

    _, _, cohorts = get(f"{dashboard.url}/api/cohorts?name={cq}", team_a_token)
    assert [q["name"] for q in cohorts["clusterQueues"]] == [cq] and cohorts["paging"]["total"] == 1

    _, _, whoami = get(f"{dashboard.url}/api/whoami", team_a_token)
    assert whoami["user"] == f"system:serviceaccount:{team_a}:team-a"


def test_bad_paging_is_refused_with_the_parameter_named(dashboard: Served, admin_token: str) -> None:
    status, _, body = get(f"{dashboard.url}/api/ray?limit=100000", admin_token)
    assert status == 400 and "limit=100000" in body["error"]
    status, _, body = get(f"{dashboard.url}/api/ray?offset=x", admin_token)
    assert status == 400 and "offset='x'" in body["error"]
