"""Where the local control plane keeps its binaries and state."""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The checkout that holds ``tools/`` (the package is used from a source tree)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "tools" / "kubernetes" / "go.mod").is_file():
            return parent
    raise FileNotFoundError("tools/kubernetes/go.mod not found above " + str(here))


def cache_root() -> Path:
    """Binaries live outside the repository so every clone reuses them."""
    env = os.environ.get("RAYQUOTA_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) / "rayquota" if xdg else Path.home() / ".cache" / "rayquota"


def state_root() -> Path:
    """Per-cluster state (certificates, etcd data, logs, kubeconfig)."""
    env = os.environ.get("RAYQUOTA_STATE_DIR")
    return Path(env) if env else cache_root() / "clusters"
