"""Where the local control plane keeps its binaries and state."""

from __future__ import annotations

import os
from pathlib import Path

from rayquota import environment


def repo_root() -> Path:
    """The checkout that holds ``tools/`` (the package is used from a source tree)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "tools" / "kubernetes" / "go.mod").is_file():
            return parent
    raise FileNotFoundError("tools/kubernetes/go.mod not found above " + str(here))


def cache_root() -> Path:
    """Binaries live outside the repository so every clone reuses them."""
    env = environment.tool_variable("RAYQUOTA_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) / "rayquota" if xdg else Path.home() / ".cache" / "rayquota"


def state_root() -> Path:
    """Per-cluster state (certificates, etcd data, logs, kubeconfig)."""
    env = environment.tool_variable("RAYQUOTA_STATE_DIR")
    return Path(env) if env else cache_root() / "clusters"


def is_local_kubeconfig(kubeconfig: str | os.PathLike[str]) -> bool:
    """Is this the admin kubeconfig of a local control plane (`rayquota cluster up`)? Its API
    server runs on this host, so it can call a webhook server on 127.0.0.1."""
    path = Path(kubeconfig).expanduser().resolve()
    return path.name == "kubeconfig" and path.parent.parent == state_root().expanduser().resolve()
