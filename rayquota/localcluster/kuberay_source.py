"""`rayquota peers build kuberay --source DIR [--tag TAG]`: KubeRay's operator built from its source.

The Go module proxy serves KubeRay v1.6.2 (the pinned peer, `peers.build_kuberay`) but refuses
v1.7.0's module zip, so a later release is built from a source snapshot instead: DIR is either a
KubeRay source tree (its root or its `ray-operator/`), built as it is, or, with `--tag`, a git
repository (bare or not) whose tag's `ray-operator/` tree is built. Either way the tree is copied
first (the build may rewrite go.mod/go.sum; the source stays untouched) and built with the module
proxy's dependencies (go.mod/go.sum pin them). The binary and the tree's CRDs land in
`cache_root()/bin/kuberay-operator-<version>/` (`kuberay-operator` and `crd/`), the directory the
side-by-side script's `--kuberay-binary`/`--kuberay-crds` and tools/compare_crds_with_kuberay.py
are pointed at; an existing one is reused.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rayquota.localcluster import binaries, peers
from rayquota.localcluster.paths import cache_root

BINARY = "kuberay-operator"
CRD_DIR = "crd"
OPERATOR_DIR = "ray-operator"
# Where KubeRay's source states its own version (the operator reports it in its user agent).
VERSION_FILE = "controllers/ray/utils/constant.go"
_VERSION_LINE = re.compile(r'^\s*KUBERAY_VERSION\s*=\s*"([^"]*)"', re.MULTILINE)
# A release's name, as a tag ends (`v1.7.0`, `ray-operator/v1.7.0`, `v1.7.0-rc.0`); it names a
# cache directory, so nothing else is accepted.
_RELEASE = re.compile(r"v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?")


class SourceError(binaries.BuildError):
    """DIR (or the tag in it) is not a KubeRay operator source that can be built."""


@dataclass(frozen=True)
class SourceBuild:
    """What was built and where it is."""

    version: str
    binary: Path
    crds: Path


def build_dir(version: str) -> Path:
    """`cache_root()/bin/kuberay-operator-<version>`: named as the pinned peer's directory."""
    return dataclasses.replace(peers.KUBERAY, version=version).cache_dir


def version_of_tag(tag: str) -> str:
    """The release a tag names: its last path element (`ray-operator/v1.7.0` -> `v1.7.0`)."""
    version = tag.rstrip("/").rsplit("/", 1)[-1]
    if not _RELEASE.fullmatch(version):
        raise SourceError(f"--tag {tag!r} does not end in a KubeRay release such as v1.7.0")
    return version


def build_from_source(source: Path, tag: str | None = None, *, log: bool = True) -> SourceBuild:
    """Build (or reuse) KubeRay's operator from SOURCE, a source tree or (with TAG) a git repository."""
    source = source.expanduser()
    if not source.is_dir():
        raise SourceError(f"--source {source}: no such directory")
    operator: Path | None = None
    if tag is None:
        operator = _operator_dir(source)
        version, where = _tree_version(operator, source), str(source)
    else:
        version, where = version_of_tag(tag), f"{source} at {tag}"
        _check_tag(source, tag)
    out = build_dir(version)
    done = SourceBuild(version, out / BINARY, out / CRD_DIR)
    if done.binary.is_file() and os.access(done.binary, os.X_OK) and done.crds.is_dir():
        peers.say(f"KubeRay {version} is already built in {out} (delete it to build again)", log)
        return done
    go = binaries.find_go()
    started = time.monotonic()
    # The copy that is built: go may rewrite its go.mod/go.sum, never the source's.
    tree = cache_root() / "src" / f"{BINARY}-{version}.tmp-{os.getpid()}"
    shutil.rmtree(tree, ignore_errors=True)
    tmp = peers.staging_dir(out)
    try:
        peers.say(f"copying KubeRay {version}'s {OPERATOR_DIR}/ from {where} ...", log)
        if operator is None:
            _extract_tag(source, str(tag), tree)
            _operator_dir(tree, what=where)
        else:
            shutil.copytree(operator, tree, ignore=shutil.ignore_patterns(".git"))
        peers.say(f"building {BINARY} {version} from source with go (cached afterwards) ...", log)
        build_step = ["build", "-ldflags=-s -w", "-o", str(tmp / BINARY), "."]
        peers.go_build(go, build_step, tree, label=f"{BINARY} {version}", started=started, log=log, mod="mod")
        shutil.copytree(tree / "config" / "crd" / "bases", tmp / CRD_DIR)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    peers.publish(tmp, out)
    peers.say(f"  built in {time.monotonic() - started:.0f}s -> {out}", log)
    return done


def _operator_dir(source: Path, what: str | None = None) -> Path:
    """The `ray-operator/` module in SOURCE (SOURCE itself or its child), or why it is not one."""
    what = what or str(source)
    if _is_bare_git(source):
        raise SourceError(
            f"--source {what} is a bare git repository: give --tag (e.g. v1.7.0) to build one of its tags"
        )
    for candidate in (source / OPERATOR_DIR, source):
        go_mod = candidate / "go.mod"
        if not go_mod.is_file():
            continue
        module = _module_of(go_mod)
        if module != peers.KUBERAY_MODULE:
            raise SourceError(
                f"--source {what} is not a KubeRay source: {go_mod} is module {module or '(none)'}, "
                f"not {peers.KUBERAY_MODULE}"
            )
        for needed in ("main.go", "config/crd/bases"):
            if not (candidate / needed).exists():
                raise SourceError(f"--source {what} is not a KubeRay source: {candidate / needed} is missing")
        return candidate
    raise SourceError(
        f"--source {what} is not a KubeRay source: neither {source / OPERATOR_DIR / 'go.mod'} nor "
        f"{source / 'go.mod'} exists"
    )


def _module_of(go_mod: Path) -> str:
    found = re.search(r"^module\s+(\S+)", go_mod.read_text(encoding="utf-8", errors="replace"), re.MULTILINE)
    return found.group(1) if found else ""


def _tree_version(operator: Path, source: Path) -> str:
    """The release a source tree says it is (its KUBERAY_VERSION), which names its cache directory."""
    path = operator / VERSION_FILE
    found = _VERSION_LINE.search(path.read_text(encoding="utf-8")) if path.is_file() else None
    if found is None:
        raise SourceError(f"--source {source} is not a KubeRay source: no KUBERAY_VERSION in {path}")
    if not _RELEASE.fullmatch(found.group(1)):
        raise SourceError(
            f"--source {source} is KubeRay {found.group(1)!r} by its KUBERAY_VERSION ({path}), not a "
            "release: build a release tag from a git repository with --tag (e.g. v1.7.0)"
        )
    return found.group(1)


def _git(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True, check=False)


def _is_bare_git(directory: Path) -> bool:
    return _git(directory, "rev-parse", "--is-bare-repository").stdout.strip() == "true"


def _check_tag(source: Path, tag: str) -> None:
    if _git(source, "rev-parse", "--git-dir").returncode != 0:
        raise SourceError(
            f"--source {source} is not a git repository, so --tag {tag} cannot be read from it "
            "(without --tag, a source tree is built as it is)"
        )
    if _git(source, "rev-parse", "--verify", "--quiet", f"{tag}^{{commit}}").returncode != 0:
        raise SourceError(f"--source {source} has no tag {tag}")
    if _git(source, "cat-file", "-e", f"{tag}:{OPERATOR_DIR}/go.mod").returncode != 0:
        raise SourceError(
            f"--source {source} at {tag} is not a KubeRay source: it has no {OPERATOR_DIR}/go.mod"
        )


def _extract_tag(source: Path, tag: str, into: Path) -> None:
    """The tag's `ray-operator/` tree, as the files of INTO."""
    into.mkdir(parents=True)
    cmd = ["git", "-C", str(source), "archive", "--format=tar", f"{tag}:{OPERATOR_DIR}"]
    with tempfile.TemporaryFile() as errors:
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors) as proc:
            if proc.stdout is None:
                raise SourceError(f"`{' '.join(cmd)}` gave no output")
            try:
                with tarfile.open(fileobj=proc.stdout, mode="r|") as archive:
                    archive.extractall(into, filter="data")
                unreadable = ""
            except tarfile.TarError as exc:
                unreadable = f" ({exc})"
        if proc.returncode != 0 or unreadable:
            errors.seek(0)
            said = errors.read().decode(errors="replace").strip()
            raise SourceError(f"`{' '.join(cmd)}` failed{unreadable}: {said}")
