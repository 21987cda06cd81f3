"""What the operator registers for a local control plane: a Service of type ExternalName whose
host is 127.0.0.1 (the aggregator's ResolveCluster answers https://<externalName>:<port> for that
type), APIServices naming it with the throw-away CA, and a serving certificate valid for the name
the aggregator checks (<service>.<namespace>.svc)."""

from __future__ import annotations

import base64

from cryptography import x509

from rayquota.operator.visibility import discovery
from rayquota.operator.visibility.registration import (
    HOLDER_ANNOTATION,
    LoopbackCertificate,
    api_service,
    external_name_service,
    service_host,
    viewer_role,
)


def test_the_service_points_the_aggregator_at_loopback() -> None:
    body = external_name_service(41234)
    assert body["metadata"] == {"name": "rayquota-visibility", "namespace": "kube-system"}
    assert body["spec"] == {
        "type": "ExternalName",
        "externalName": "127.0.0.1",
        "ports": [{"name": "https", "port": 41234}],
    }


def test_each_version_has_an_apiservice_trusting_the_generated_ca() -> None:
    certificate = LoopbackCertificate.issue()
    group = discovery.of_mode("kueue")
    bodies = [api_service(group, v, 41234, certificate.ca_bundle, "op-1") for v in group.versions]
    assert [b["metadata"]["name"] for b in bodies] == [
        "v1beta2.visibility.kueue.x-k8s.io",
        "v1beta1.visibility.kueue.x-k8s.io",
    ]
    assert bodies[0]["metadata"]["annotations"] == {HOLDER_ANNOTATION: "op-1"}
    assert bodies[0]["spec"]["service"] == {
        "name": "rayquota-visibility",
        "namespace": "kube-system",
        "port": 41234,
    }
    ca = x509.load_pem_x509_certificate(base64.b64decode(certificate.ca_bundle))
    served = x509.load_pem_x509_certificate(certificate.cert)
    served.verify_directly_issued_by(ca)
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert service_host() in names.get_values_for_type(x509.DNSName)
    assert service_host() == "rayquota-visibility.kube-system.svc"


def test_the_viewer_role_is_aggregated_into_view_edit_and_admin() -> None:
    role = viewer_role(discovery.of_mode("rayquota"))
    assert {k for k, v in role["metadata"]["labels"].items() if v == "true"} == {
        "rbac.authorization.k8s.io/aggregate-to-view",
        "rbac.authorization.k8s.io/aggregate-to-edit",
        "rbac.authorization.k8s.io/aggregate-to-admin",
    }
    assert role["rules"] == [
        {
            "apiGroups": ["visibility.rayquota.io"],
            "resources": ["clusterqueues/pendingworkloads", "localqueues/pendingworkloads"],
            "verbs": ["get", "list", "watch"],
        }
    ]
