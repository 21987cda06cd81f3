"""A worker's kubeconfig that could run code, read the operator's files or drop TLS is refused
with the field named (Kueue's MultiKueue rules, plus client-certificate file paths)."""

from __future__ import annotations

import asyncio
import base64
import copy
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from rayquota.operator.kube import KubeClient
from rayquota.operator.queue.multikueue.kubeconfig import InsecureWorkerConfig, client_of, kubeconfig_text
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


class _Secrets:
    """The operator's namespace as kubeconfig_text reads it: GET of one Secret."""

    def __init__(self, secrets: dict[str, dict[str, Any]]) -> None:
        self.secrets = secrets

    async def get(self, path: str) -> dict[str, Any] | None:
        return self.secrets.get(path.rsplit("/", 1)[-1])


def _text_of(source: dict[str, Any], secrets: dict[str, dict[str, Any]], prefix: str) -> str:
    local = cast(KubeClient, _Secrets(secrets))
    return asyncio.run(kubeconfig_text(local, {"kubeConfig": source}, "rayquota-system", prefix))


def test_a_kubeconfig_that_cannot_be_had_says_kueues_bad_kubeconfig(tmp_path: Path) -> None:
    allowed = tmp_path / "kubeconfigs"
    allowed.mkdir()
    (allowed / "worker1").write_text("kind: Config\n")
    encoded = base64.b64encode(b"kind: Config\n").decode()
    assert _text_of({"location": "w1"}, {"w1": {"data": {"kubeconfig": encoded}}}, str(allowed)) == (
        "kind: Config\n"
    )
    assert _text_of({"locationType": "Path", "location": str(allowed / "worker1")}, {}, str(allowed))
    for source, secrets, words in [
        ({"location": "missing"}, {}, "Secret rayquota-system/missing not found"),
        ({"location": "w1"}, {"w1": {"data": {}}}, "has no key 'kubeconfig'"),
        (
            {"locationType": "Path", "location": str(tmp_path / "elsewhere")},
            {},
            "not under the allowed folder",
        ),
        ({"locationType": "Path", "location": str(allowed / "absent")}, {}, "kubeconfig file"),
    ]:
        with pytest.raises(WorkerConfigError, match=words) as failed:
            _text_of(source, secrets, str(allowed))
        # Kueue's reason for a kubeconfig it could not load (not InsecureKubeConfig).
        assert failed.value.reason == "BadKubeConfig", (source, failed.value)
        assert not isinstance(failed.value, InsecureWorkerConfig)
    with pytest.raises(WorkerConfigError, match="clusterProfileRef") as profile:
        asyncio.run(
            kubeconfig_text(cast(KubeClient, _Secrets({})), {"clusterProfileRef": {"name": "p"}}, "ns")
        )
    assert profile.value.reason == "BadClusterProfile"
    with pytest.raises(WorkerConfigError, match="not a YAML mapping") as unreadable:
        client_of("just text")
    assert unreadable.value.reason == "BadKubeConfig"
