"""The request-log lines the RBAC end-to-end test reads map to the RBAC verbs the API server checks."""

from __future__ import annotations

import pytest

from tests.e2e.chart import grant_of_request


@pytest.mark.parametrize(
    ("line", "grant"),
    [
        ("GET /api/v1/namespaces/ns/pods", ("", "pods", "list")),
        ("WATCH /api/v1/namespaces/ns/pods", ("", "pods", "watch")),
        ("GET /api/v1/namespaces", ("", "namespaces", "list")),
        ("GET /api/v1/namespaces/ns", ("", "namespaces", "get")),
        ("POST /api/v1/namespaces/ns/events", ("", "events", "create")),
        ("PATCH /api/v1/namespaces/ns/events/e.1", ("", "events", "patch")),
        ("PUT /apis/ray.io/v1/namespaces/ns/rayjobs/j/status", ("ray.io", "rayjobs/status", "update")),
        (
            "PUT /apis/rayquota.io/v1alpha1/clusterqueues/cq/status",
            ("rayquota.io", "clusterqueues/status", "update"),
        ),
        ("GET /apis/rayquota.io/v1alpha1/clusterqueues?limit=500", ("rayquota.io", "clusterqueues", "list")),
        ("DELETE /apis/batch/v1/namespaces/ns/jobs/j", ("batch", "jobs", "delete")),
        (
            "GET /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/rq",
            ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "get"),
        ),
    ],
)
def test_grant_of_request(line: str, grant: tuple[str, str, str]) -> None:
    assert grant_of_request(line) == grant
