"""A MultiKueueCluster whose kubeconfig could run a command in the manager's operator or drop TLS
is refused: ``Active=False``, reason ``InsecureKubeConfig``, the field named, and the command
never run; a Path outside the allowed folder says ``BadKubeConfig`` (Kueue's MultiKueue rules)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import yaml

from rayquota.localcluster.multicluster import SECRET_NAMESPACE
from tests.integration.multicluster.conftest import Fleet, apply_yaml
from tests.integration.ray.kubehelpers import condition
from tests.polling import wait_for


def _kubeconfig(user: dict[str, Any], cluster: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "w", "cluster": cluster}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "w", "context": {"cluster": "w", "user": "u"}}],
            "current-context": "w",
        }
    )


def test_unsafe_worker_kubeconfigs_are_refused_with_the_field_named(fleet: Fleet, tmp_path: Path) -> None:
    marker = tmp_path / "exec-plugin-ran"
    server = "https://127.0.0.1:1"
    unsafe = {
        "exec": (
            _kubeconfig(
                {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": "touch",
                        "args": [str(marker)],
                    }
                },
                {"server": server, "certificate-authority-data": "Q0E="},
            ),
            "users[u].user.exec",
        ),
        "insecure": (
            _kubeconfig({"token": "t"}, {"server": server, "insecure-skip-tls-verify": True}),
            "clusters[w].cluster.insecure-skip-tls-verify",
        ),
        "tokenfile": (
            _kubeconfig(
                {"tokenFile": "/etc/hostname"}, {"server": server, "certificate-authority-data": "Q0E="}
            ),
            "users[u].user.tokenFile",
        ),
    }
    stem = f"unsafe-{secrets.token_hex(3)}"
    names = {form: f"{stem}-{form}" for form in unsafe}
    docs: list[dict[str, Any]] = []
    for form, (text, _field) in unsafe.items():
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": names[form], "namespace": SECRET_NAMESPACE},
                "stringData": {"kubeconfig": text},
            }
        )
        docs.append(
            {
                "apiVersion": "rayquota.io/v1alpha1",
                "kind": "MultiKueueCluster",
                "metadata": {"name": names[form]},
                "spec": {
                    "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": names[form]}}
                },
            }
        )
    # A Path outside the allowed folder (Kueue's /etc/multikueue/kubeconfigs) is refused too.
    outside = f"{stem}-path"
    docs.append(
        {
            "apiVersion": "rayquota.io/v1alpha1",
            "kind": "MultiKueueCluster",
            "metadata": {"name": outside},
            "spec": {
                "clusterSource": {
                    "kubeConfig": {"locationType": "Path", "location": str(fleet.manager.kubeconfig)}
                }
            },
        }
    )
    manager = fleet.manager
    apply_yaml(manager, docs)
    try:

        def active_condition(name: str) -> dict[str, Any] | None:
            got = manager.kubectl("get", "multikueueclusters.rayquota.io", name, "-o", "json", check=False)
            return condition(json.loads(got.stdout), "Active") if got.returncode == 0 else None

        expected = {names[form]: ("InsecureKubeConfig", field) for form, (_text, field) in unsafe.items()}
        # Kueue checks the path while reading the kubeconfig: its reason is BadKubeConfig.
        expected[outside] = ("BadKubeConfig", "not under the allowed folder /etc/multikueue/kubeconfigs")
        for name, (reason, field) in expected.items():
            refused = wait_for(
                f"{name}: Active=False {reason}",
                lambda name=name, reason=reason: (
                    (c := active_condition(name)) is not None
                    and c.get("status") == "False"
                    and c.get("reason") == reason
                    and c
                ),
                timeout_s=60,
            )
            assert field in refused["message"], refused
        assert not marker.exists(), "the exec credential plugin ran inside the operator"
    finally:
        for name in [*names.values(), outside]:
            manager.kubectl("delete", "multikueueclusters.rayquota.io", name, "--wait=false", check=False)
        for name in names.values():
            manager.kubectl("delete", "secret", name, "-n", SECRET_NAMESPACE, "--wait=false", check=False)
