from __future__ import annotations

from pathlib import Path

import pytest

from rayquota.localcluster import binaries


def test_missing_go_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(binaries.shutil, "which", lambda _name: None)
    monkeypatch.setattr(binaries, "GO_FALLBACK", tmp_path / "no-go")
    with pytest.raises(binaries.BuildError, match=r"`go` command was not found.*go\.dev/doc/install"):
        binaries.find_go()


def test_cache_is_keyed_by_tool_and_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAYQUOTA_CACHE_DIR", str(tmp_path))
    assert (
        binaries.KUBERNETES.path("kubectl")
        == tmp_path / "bin" / f"kubernetes-{binaries.K8S_VERSION}" / "kubectl"
    )
    assert not binaries.ETCD.is_built()


def test_version_ldflags_stamp_the_release() -> None:
    flags = " ".join(binaries.KUBERNETES.version_ldflags)
    assert f"k8s.io/component-base/version.gitVersion={binaries.K8S_VERSION}" in flags
    assert "gitMinor=34" in flags


def test_tool_modules_pin_the_versions_we_stamp() -> None:
    root = Path(__file__).resolve().parents[3] / "tools"
    assert f"k8s.io/kubernetes {binaries.K8S_VERSION}" in (root / "kubernetes" / "go.mod").read_text()
    assert f"go.etcd.io/etcd/server/v3 {binaries.ETCD_VERSION}" in (root / "etcd" / "go.mod").read_text()
    assert f"sigs.k8s.io/kwok {binaries.KWOK_VERSION}" in (root / "kwok" / "go.mod").read_text()
    assert f"helm.sh/helm/v3 {binaries.HELM_VERSION}" in (root / "helm" / "go.mod").read_text()
    staging = (root / "kubernetes" / "go.mod").read_text()
    minor = binaries.K8S_VERSION.replace("v1.", "v0.")
    assert f"k8s.io/client-go => k8s.io/client-go {minor}" in staging


def test_a_failed_build_names_the_command_and_leaves_no_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RAYQUOTA_CACHE_DIR", str(tmp_path))
    broken = binaries.ToolBuild(
        key="broken",
        version="v0",
        module_dir="tools/etcd",
        packages={"nothing": "go.etcd.io/etcd/server/v3/no-such-package"},
    )
    with pytest.raises(binaries.BuildError, match=r"go build .*no-such-package.* failed in tools/etcd"):
        binaries.build(broken, log=False)
    assert list((tmp_path / "bin").iterdir()) == []
