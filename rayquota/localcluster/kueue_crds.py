"""Kueue's CRDs (kueue.x-k8s.io, at the version the peers build pins) for Kueue-API mode on the
local control plane.

They come from the Go module cache, like the binaries: `go mod download` of Kueue's module in
tools/kueue (a download, no build), then the copy `peers.kueue_workdir()` keeps in the cache.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from rayquota.localcluster import binaries, peers
from rayquota.localcluster.install import Kubectl, install_crds
from rayquota.localcluster.paths import repo_root


def _download_module() -> None:
    if peers.module_cache_path(peers.KUEUE_MODULE, peers.KUEUE_VERSION).is_dir():
        return
    result = subprocess.run(
        [binaries.find_go(), "mod", "download", f"{peers.KUEUE_MODULE}@{peers.KUEUE_VERSION}"],
        cwd=repo_root() / peers.KUEUE_PERF.module_dir,
        env=dict(os.environ, GOFLAGS="-mod=mod"),
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise binaries.BuildError(f"go mod download {peers.KUEUE_MODULE}: {result.stderr[-2000:]}")


def crd_dir() -> Path:
    _download_module()
    return peers.kueue_crd_dir()


def install(target: Kubectl) -> list[str]:
    """Apply Kueue's CRDs server-side and wait until each is Established; their names."""
    return install_crds(target, crd_dir())
