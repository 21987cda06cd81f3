"""`rayquota peers build kuberay --source DIR [--tag TAG]` (rayquota.localcluster.kuberay_source):
which directories are KubeRay sources, where the build lands, and the errors. `go` is replaced by
a stand-in that writes the binary, so no Go build runs here."""

from __future__ import annotations

import argparse
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rayquota.cli import build_parser
from rayquota.localcluster import binaries, kuberay_source
from rayquota.localcluster import cli as local_cli

MODULE = "github.com/ray-project/kuberay/ray-operator"


def kuberay_tree(root: Path, version: str = "v9.9.9", module: str = MODULE) -> Path:
    """A tiny stand-in of KubeRay's repository: the files the build reads, at the places KubeRay has them."""
    operator = root / "ray-operator"
    (operator / "config" / "crd" / "bases").mkdir(parents=True)
    (operator / "controllers" / "ray" / "utils").mkdir(parents=True)
    (operator / "go.mod").write_text(f"module {module}\n\ngo 1.26.0\n")
    (operator / "main.go").write_text("package main\n\nfunc main() {}\n")
    (operator / "controllers" / "ray" / "utils" / "constant.go").write_text(
        f'package utils\n\nconst (\n\tKUBERAY_VERSION = "{version}"\n)\n'
    )
    (operator / "config" / "crd" / "bases" / "ray.io_rayclusters.yaml").write_text(
        "kind: CustomResourceDefinition\n"
    )
    return root


def git(directory: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(directory), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
    )


def bare_repository(tmp_path: Path, tag: str, version: str) -> Path:
    work = kuberay_tree(tmp_path / "work", version)
    git(work, "init", "-q")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "KubeRay")
    git(work, "tag", tag)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(tmp_path / "bare")], check=True)
    return tmp_path / "bare"


@dataclass
class FakeGo:
    """Stands in for `go build`: writes the `-o` file and records what it was run with."""

    returncode: int = 0
    calls: list[tuple[list[str], Path, dict[str, str], list[str]]] = field(default_factory=list)

    def run(
        self, cmd: list[str], *, cwd: Path, label: str, env: dict[str, str], started: float, log: bool
    ) -> tuple[int, str]:
        self.calls.append((cmd, cwd, env, sorted(p.name for p in cwd.iterdir())))
        (cwd / "go.sum").write_text("written by go\n")  # -mod=mod may rewrite the module files
        if self.returncode:
            return self.returncode, "go: compile failed: boom"
        output = Path(cmd[cmd.index("-o") + 1])
        output.write_text("#!/bin/sh\n")
        output.chmod(0o755)
        return 0, ""


@pytest.fixture
def go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeGo:
    monkeypatch.setenv("RAYQUOTA_CACHE_DIR", str(tmp_path / "cache"))
    fake = FakeGo()
    monkeypatch.setattr(binaries, "find_go", lambda: "/usr/bin/go-stand-in")
    monkeypatch.setattr(binaries, "run_with_progress", fake.run)
    return fake


def built_dir(tmp_path: Path, version: str) -> Path:
    return tmp_path / "cache" / "bin" / f"kuberay-operator-{version}"


# --- the command line ------------------------------------------------------------------------


def test_the_peers_command_takes_a_source_directory_and_a_tag() -> None:
    args = build_parser().parse_args(
        ["peers", "build", "kuberay", "--source", "/src/kuberay", "--tag", "v1.7.0"]
    )
    assert (args.peer, args.source, args.tag) == ("kuberay", "/src/kuberay", "v1.7.0")
    plain = build_parser().parse_args(["peers", "build", "kuberay"])
    assert (plain.source, plain.tag) == (None, None)


@pytest.mark.parametrize(
    ("peer", "source", "tag", "said"),
    [
        ("kueue", "/src", None, "--source builds KubeRay's operator only, not kueue"),
        ("all", "/src", None, "--source builds KubeRay's operator only, not all"),
        ("kuberay", None, "v1.7.0", "--tag v1.7.0 selects a tag of the git repository given by --source"),
    ],
)
def test_source_and_tag_are_refused_where_they_mean_nothing(
    peer: str, source: str | None, tag: str | None, said: str, go: FakeGo, capsys: pytest.CaptureFixture[str]
) -> None:
    assert local_cli.peers_main(argparse.Namespace(peer=peer, source=source, tag=tag)) == 2
    assert said in capsys.readouterr().err
    assert go.calls == []


def test_the_command_prints_where_the_build_is(
    tmp_path: Path, go: FakeGo, capsys: pytest.CaptureFixture[str]
) -> None:
    source = kuberay_tree(tmp_path / "kuberay")
    assert local_cli.peers_main(argparse.Namespace(peer="kuberay", source=str(source), tag=None)) == 0
    out, err = capsys.readouterr()
    assert f"kuberay-operator         {built_dir(tmp_path, 'v9.9.9') / 'kuberay-operator'}" in out
    assert f"kuberay-crds             {built_dir(tmp_path, 'v9.9.9') / 'crd'}" in out
    assert "building kuberay-operator v9.9.9 from source with go" in err
    assert "built in" in err


def test_the_command_names_a_directory_that_is_not_kuberay(
    tmp_path: Path, go: FakeGo, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "elsewhere").mkdir()
    assert (
        local_cli.peers_main(argparse.Namespace(peer="kuberay", source=str(tmp_path / "elsewhere"), tag=None))
        == 1
    )
    assert f"error: --source {tmp_path / 'elsewhere'} is not a KubeRay source" in capsys.readouterr().err


# --- builds ----------------------------------------------------------------------------------


@pytest.mark.parametrize("given", ["root", "ray-operator"])
def test_a_source_tree_is_built_from_a_copy_into_its_versions_cache(
    tmp_path: Path, go: FakeGo, given: str
) -> None:
    root = kuberay_tree(tmp_path / "kuberay")
    source = root if given == "root" else root / "ray-operator"
    built = kuberay_source.build_from_source(source, log=False)
    out = built_dir(tmp_path, "v9.9.9")
    assert (built.version, built.binary, built.crds) == ("v9.9.9", out / "kuberay-operator", out / "crd")
    assert os.access(built.binary, os.X_OK)
    assert sorted(p.name for p in built.crds.iterdir()) == ["ray.io_rayclusters.yaml"]
    [(cmd, cwd, env, files)] = go.calls
    assert cmd[cmd.index("/usr/bin/go-stand-in") :] == [
        "/usr/bin/go-stand-in", "build", "-trimpath", "-ldflags=-s -w", "-o", str(cmd[-2]), ".",
    ]  # fmt: skip
    assert {"go.mod", "main.go", "config", "controllers"} <= set(files)
    assert (env["CGO_ENABLED"], env["GOFLAGS"]) == ("0", "-mod=mod -buildvcs=false")
    # Built in a copy, removed afterwards: what go wrote never reaches the source.
    assert cwd != root / "ray-operator" and not cwd.exists()
    assert not (root / "ray-operator" / "go.sum").exists()
    assert sorted(p.name for p in out.parent.iterdir()) == ["kuberay-operator-v9.9.9"]


def test_a_build_there_is_reused(tmp_path: Path, go: FakeGo, capsys: pytest.CaptureFixture[str]) -> None:
    source = kuberay_tree(tmp_path / "kuberay")
    first = kuberay_source.build_from_source(source)
    assert kuberay_source.build_from_source(source) == first
    assert len(go.calls) == 1
    assert f"KubeRay v9.9.9 is already built in {built_dir(tmp_path, 'v9.9.9')}" in capsys.readouterr().err


@pytest.mark.parametrize("tag", ["ray-operator/v9.8.0", "v9.8.0"])
def test_a_tag_of_a_bare_repository_is_built_under_the_tags_version(
    tmp_path: Path, go: FakeGo, tag: str
) -> None:
    # Between releases the source says "nightly"; the tag names the build.
    bare = bare_repository(tmp_path, tag, "nightly")
    built = kuberay_source.build_from_source(bare, tag, log=False)
    assert built.binary == built_dir(tmp_path, "v9.8.0") / "kuberay-operator"
    assert (built.crds / "ray.io_rayclusters.yaml").is_file()
    [(_, cwd, _, files)] = go.calls
    assert {"go.mod", "main.go", "config", "controllers"} <= set(files) and not cwd.exists()


def test_a_failed_go_build_leaves_nothing_behind(tmp_path: Path, go: FakeGo) -> None:
    go.returncode = 1
    with pytest.raises(binaries.BuildError, match="boom"):
        kuberay_source.build_from_source(kuberay_tree(tmp_path / "kuberay"), log=False)
    assert list((tmp_path / "cache" / "bin").iterdir()) == []
    assert list((tmp_path / "cache" / "src").iterdir()) == []


# --- what is not a KubeRay source ------------------------------------------------------------


def test_directories_that_are_not_kuberay_sources_are_named(tmp_path: Path, go: FakeGo) -> None:
    def refused(source: Path, tag: str | None = None) -> str:
        with pytest.raises(kuberay_source.SourceError) as caught:
            kuberay_source.build_from_source(source, tag, log=False)
        return str(caught.value)

    assert refused(tmp_path / "missing") == f"--source {tmp_path / 'missing'}: no such directory"
    (tmp_path / "empty").mkdir()
    assert refused(tmp_path / "empty") == (
        f"--source {tmp_path / 'empty'} is not a KubeRay source: neither "
        f"{tmp_path / 'empty' / 'ray-operator' / 'go.mod'} nor {tmp_path / 'empty' / 'go.mod'} exists"
    )
    other = kuberay_tree(tmp_path / "other", module="example.com/not-kuberay")
    assert refused(other) == (
        f"--source {other} is not a KubeRay source: {other / 'ray-operator' / 'go.mod'} is module "
        f"example.com/not-kuberay, not {MODULE}"
    )
    no_main = kuberay_tree(tmp_path / "no-main")
    (no_main / "ray-operator" / "main.go").unlink()
    assert refused(no_main) == (
        f"--source {no_main} is not a KubeRay source: {no_main / 'ray-operator' / 'main.go'} is missing"
    )
    nightly = kuberay_tree(tmp_path / "nightly", version="nightly")
    assert refused(nightly).startswith(f"--source {nightly} is KubeRay 'nightly' by its KUBERAY_VERSION")
    assert "--tag" in refused(nightly)
    # --tag reads a git repository; a bare one needs it.
    assert refused(kuberay_tree(tmp_path / "plain"), "v9.9.9") == (
        f"--source {tmp_path / 'plain'} is not a git repository, so --tag v9.9.9 cannot be read from it "
        "(without --tag, a source tree is built as it is)"
    )
    bare = bare_repository(tmp_path / "git", "v9.8.0", "v9.8.0")
    assert refused(bare) == (
        f"--source {bare} is a bare git repository: give --tag (e.g. v1.7.0) to build one of its tags"
    )
    assert refused(bare, "v1.0.0") == f"--source {bare} has no tag v1.0.0"
    for tag in ("main", "../v1.7.0x", ""):
        assert refused(bare, tag) == f"--tag {tag!r} does not end in a KubeRay release such as v1.7.0"
    assert go.calls == []
    assert not (tmp_path / "cache" / "bin").exists()


def test_a_tag_without_kuberays_operator_is_named(tmp_path: Path, go: FakeGo) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "README").write_text("not KubeRay\n")
    git(work, "init", "-q")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "other")
    git(work, "tag", "v1.0.0")
    with pytest.raises(kuberay_source.SourceError) as caught:
        kuberay_source.build_from_source(work, "v1.0.0", log=False)
    assert (
        str(caught.value)
        == f"--source {work} at v1.0.0 is not a KubeRay source: it has no ray-operator/go.mod"
    )
    assert go.calls == []
