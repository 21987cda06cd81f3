"""The async Kubernetes client sends the credentials a kubeconfig names."""

from __future__ import annotations

from pathlib import Path

import yaml

from rayquota.operator.kube import KubeClient


def _kubeconfig(tmp_path: Path, user: dict[str, str]) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def test_bearer_token_from_kubeconfig_is_sent(tmp_path: Path) -> None:
    client = KubeClient.from_environment(str(_kubeconfig(tmp_path, {"token": "abc.def"})))
    assert client._headers(None)["Authorization"] == "Bearer abc.def"


def test_kubeconfig_without_token_sends_no_authorization(tmp_path: Path) -> None:
    client = KubeClient.from_environment(str(_kubeconfig(tmp_path, {"username": "x", "password": "y"})))
    headers = client._headers("application/json")
    assert headers["Content-Type"] == "application/json"
    assert "Bearer" not in headers.get("Authorization", "")
