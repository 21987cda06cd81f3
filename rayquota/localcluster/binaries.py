"""Build the control-plane binaries from the Go module proxy and cache them.

Each tool has a Go module under ``tools/`` that pins its release. We build with the
ordinary ``go`` command, stamp the real version through ldflags, and keep the result
in a cache directory outside the repository, keyed by tool and version, so a second
run reuses it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rayquota.localcluster.paths import cache_root, repo_root

K8S_VERSION = "v1.34.4"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.7.0"
HELM_VERSION = "v3.19.5"

# A fixed build date keeps the binaries reproducible; /version still reports the release.
_BUILD_DATE = "2026-01-01T00:00:00Z"


@dataclass(frozen=True)
class ToolBuild:
    """One `go build` invocation producing one or more binaries."""

    key: str
    version: str
    module_dir: str
    packages: dict[str, str]  # binary name -> Go package
    version_ldflags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def cache_dir(self) -> Path:
        return cache_root() / "bin" / f"{self.key}-{self.version}"

    def path(self, binary: str) -> Path:
        return self.cache_dir / binary

    def is_built(self) -> bool:
        return all(self.path(b).is_file() and os.access(self.path(b), os.X_OK) for b in self.packages)


def _k8s_ldflags(version: str) -> tuple[str, ...]:
    major, minor = version.lstrip("v").split(".")[:2]
    flags: list[str] = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.gitCommit=0000000000000000000000000000000000000000",
            f"-X {pkg}.buildDate={_BUILD_DATE}",
        ]
    return tuple(flags)


KUBERNETES = ToolBuild(
    key="kubernetes",
    version=K8S_VERSION,
    module_dir="tools/kubernetes",
    packages={
        "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
        "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
        "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
        "kubectl": "k8s.io/kubernetes/cmd/kubectl",
    },
    version_ldflags=_k8s_ldflags(K8S_VERSION),
)
ETCD = ToolBuild(
    key="etcd",
    version=ETCD_VERSION,
    module_dir="tools/etcd",
    packages={"etcd": "go.etcd.io/etcd/server/v3"},
    version_ldflags=("-X go.etcd.io/etcd/api/v3/version.GitSHA=release",),
)
KWOK = ToolBuild(
    key="kwok",
    version=KWOK_VERSION,
    module_dir="tools/kwok",
    packages={"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
    version_ldflags=(f"-X sigs.k8s.io/kwok/pkg/consts.Version={KWOK_VERSION}",),
)
HELM = ToolBuild(
    key="helm",
    version=HELM_VERSION,
    module_dir="tools/helm",
    packages={"helm": "helm.sh/helm/v3/cmd/helm"},
    version_ldflags=(
        f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}",
        "-X helm.sh/helm/v3/internal/version.gitTreeState=clean",
    ),
)

ALL_TOOLS: tuple[ToolBuild, ...] = (ETCD, KWOK, HELM, KUBERNETES)


class BuildError(RuntimeError):
    pass


# Where the official Go tarball installs itself; used when `go` is not on PATH.
GO_FALLBACK = Path("/usr/local/go/bin/go")


def find_go() -> str:
    go = shutil.which("go") or (str(GO_FALLBACK) if GO_FALLBACK.exists() else None)
    if go is None:
        raise BuildError(
            "the `go` command was not found. rayquota builds etcd, kube-apiserver, kubectl, kwok "
            "and helm from source. Install Go 1.26 or newer (https://go.dev/doc/install, or "
            "`apt-get install golang-go` where that is new enough) and make sure `go` is on PATH."
        )
    return go


def build(tool: ToolBuild, *, log: bool = True) -> None:
    """Build one tool into its cache directory unless it is already there."""
    if tool.is_built():
        return
    go = find_go()
    tmp = tool.cache_dir.with_name(tool.cache_dir.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=readonly -buildvcs=false")
    ldflags = " ".join(("-s", "-w", *tool.version_ldflags))
    cmd = [go, "build", "-trimpath", "-ldflags", ldflags, "-o", str(tmp) + "/"]
    cmd += list(tool.packages.values())
    started = time.monotonic()
    if log:
        names = ", ".join(tool.packages)
        print(f"building {names} {tool.version} with go (cached afterwards) ...", file=sys.stderr, flush=True)
    returncode, stderr = run_with_progress(
        cmd, cwd=repo_root() / tool.module_dir, label=tool.key, env=env, started=started, log=log
    )
    if returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BuildError(f"`{' '.join(cmd)}` failed in {tool.module_dir}:\n{stderr[-4000:]}")
    # go names each binary after its package path's last element, skipping a major-version
    # suffix (go.etcd.io/etcd/server/v3 -> "server").
    for binary, package in tool.packages.items():
        parts = package.rstrip("/").split("/")
        stem = parts[-2] if re.fullmatch(r"v[0-9]+", parts[-1]) else parts[-1]
        if stem != binary:
            (tmp / stem).rename(tmp / binary)
    shutil.rmtree(tool.cache_dir, ignore_errors=True)
    tmp.rename(tool.cache_dir)
    if log:
        print(
            f"  built in {time.monotonic() - started:.0f}s -> {tool.cache_dir}", file=sys.stderr, flush=True
        )


PROGRESS_INTERVAL_S = 30.0


def run_with_progress(
    cmd: list[str], *, cwd: Path, label: str, env: dict[str, str], started: float, log: bool
) -> tuple[int, str]:
    """Run a `go` build command, saying every half minute that it is still going (a cold
    Kubernetes build is silent for minutes otherwise). Returns the exit code and stderr."""
    with tempfile.TemporaryFile(mode="w+") as errors:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            text=True,
        )
        while True:
            try:
                proc.wait(timeout=PROGRESS_INTERVAL_S)
                break
            except subprocess.TimeoutExpired:
                if log:
                    elapsed = time.monotonic() - started
                    print(f"  still building {label} ... {elapsed:.0f}s", file=sys.stderr, flush=True)
        errors.seek(0)
        return proc.returncode, errors.read()


def ensure_all(*, log: bool = True) -> dict[str, Path]:
    """Build whatever is missing and return binary name -> path."""
    paths: dict[str, Path] = {}
    for tool in ALL_TOOLS:
        build(tool, log=log)
        for binary in tool.packages:
            paths[binary] = tool.path(binary)
    return paths


def binary_paths() -> dict[str, Path]:
    return {b: t.path(b) for t in ALL_TOOLS for b in t.packages}
