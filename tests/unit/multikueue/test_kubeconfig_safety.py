"""A worker's kubeconfig that could run code, read the operator's files or drop TLS is refused
with the field named (Kueue's MultiKueue rules, plus client-certificate file paths)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.operator.queue.multikueue.kubeconfig import InsecureWorkerConfig, client_of
from rayquota.operator.queue.multikueue.kubeconfig_safety import UnsafeKubeconfig, allowed_path, refuse_unsafe
from rayquota.operator.queue.multikueue.worker import WorkerConfigError
from tests.config_env import multikueue_from_env

SAFE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [
        {"name": "w1", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": "Q0E="}}
    ],
    "users": [{"name": "mk", "user": {"token": "secret-token"}}],
    "contexts": [{"name": "w1", "context": {"cluster": "w1", "user": "mk"}}],
    "current-context": "w1",
}


def with_user(**fields: Any) -> dict[str, Any]:
    config = copy.deepcopy(SAFE)
    config["users"][0]["user"].update(fields)
    return config


def with_cluster(**fields: Any) -> dict[str, Any]:
    config = copy.deepcopy(SAFE)
    config["clusters"][0]["cluster"].update(fields)
    return config


def test_a_token_with_embedded_ca_is_accepted() -> None:
    refuse_unsafe(SAFE)
    refuse_unsafe(with_cluster(server="https://worker-1.example.internal:443"))
    refuse_unsafe(with_user(token=None, **{"client-certificate-data": "Qw==", "client-key-data": "Sw=="}))


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (
            with_user(
                exec={
                    "command": "/bin/sh",
                    "args": ["-c", "id"],
                    "apiVersion": "client.authentication.k8s.io/v1",
                }
            ),
            "users[mk].user.exec",
        ),
        (with_user(**{"auth-provider": {"name": "oidc"}}), "users[mk].user.auth-provider"),
        (
            with_user(tokenFile="/var/run/secrets/kubernetes.io/serviceaccount/token"),
            "users[mk].user.tokenFile",
        ),
        (with_user(**{"client-certificate": "/etc/rayquota/tls.crt"}), "users[mk].user.client-certificate"),
        (with_user(**{"client-key": "/etc/rayquota/tls.key"}), "users[mk].user.client-key"),
        (with_user(username="admin", password="x"), "users[mk].user.username/password"),
        (with_cluster(**{"insecure-skip-tls-verify": True}), "clusters[w1].cluster.insecure-skip-tls-verify"),
        (
            with_cluster(**{"certificate-authority": "/etc/ssl/ca.crt"}),
            "clusters[w1].cluster.certificate-authority",
        ),
        (with_cluster(server=""), "clusters[w1].cluster.server"),
        (with_cluster(server="https://bad_host!:6443"), "clusters[w1].cluster.server"),
    ],
)
def test_each_unsafe_form_is_refused_with_its_field(config: dict[str, Any], field: str) -> None:
    with pytest.raises(UnsafeKubeconfig, match=field.replace("[", r"\[").replace("]", r"\]")):
        refuse_unsafe(config)
    # The client is never built from it: the worker's condition gets Kueue's reason.
    with pytest.raises(InsecureWorkerConfig) as refused:
        client_of(yaml.safe_dump(config))
    assert refused.value.reason == "InsecureKubeConfig"
    assert isinstance(refused.value, WorkerConfigError)


def test_an_exec_plugin_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    config = with_user(
        exec={"apiVersion": "client.authentication.k8s.io/v1", "command": "touch", "args": [str(marker)]}
    )
    with pytest.raises(InsecureWorkerConfig):
        client_of(yaml.safe_dump(config))
    assert not marker.exists()


def test_a_path_location_must_stay_under_the_allowed_folder(tmp_path: Path) -> None:
    allowed = tmp_path / "kubeconfigs"
    allowed.mkdir()
    inside = allowed / "worker1"
    inside.write_text(yaml.safe_dump(SAFE))
    outside = tmp_path / "operator-secret"
    outside.write_text("x")
    (allowed / "escape").symlink_to(outside)

    assert allowed_path(str(inside), str(allowed)) == inside.resolve()
    for raw, words in [
        ("relative/worker1", "must be absolute"),
        (f"{allowed}/../operator-secret", "may not contain '..'"),
        (str(outside), "not under the allowed folder"),
        (str(allowed / "escape"), "not under the allowed folder"),
        ("", "a path is required"),
    ]:
        with pytest.raises(UnsafeKubeconfig, match=words):
            allowed_path(raw, str(allowed))
    with pytest.raises(UnsafeKubeconfig, match="does not exist"):
        allowed_path(str(inside), str(tmp_path / "missing"))


def test_the_allowed_folder_is_kueues_unless_set() -> None:
    on = {"RAYQUOTA_MULTIKUEUE": "true"}
    assert multikueue_from_env(on).kubeconfig_path_prefix == "/etc/multikueue/kubeconfigs"  # type: ignore[union-attr]
    custom = multikueue_from_env({**on, "RAYQUOTA_MULTIKUEUE_KUBECONFIG_PATH_PREFIX": "/srv/kc"})
    assert custom is not None and custom.kubeconfig_path_prefix == "/srv/kc"
