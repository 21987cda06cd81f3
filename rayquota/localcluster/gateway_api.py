"""The Gateway API CRDs (standard channel) for the local control plane.

RayService incremental upgrades route traffic through a Gateway and an HTTPRoute, so the local
control plane needs those kinds. The Gateway API Go module ships its CRDs as YAML; the release is
pinned by ``tools/gateway-api/go.mod``, fetched with ``go mod download`` (checksummed against
``go.sum``) and copied into the binary cache next to the other tools, so later runs need no Go.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from rayquota.localcluster.binaries import BuildError, find_go
from rayquota.localcluster.paths import cache_root, repo_root

MODULE_PATH = "sigs.k8s.io/gateway-api"
TOOL_DIR = "tools/gateway-api"
# Inside the module: the standard channel only (experimental kinds are not part of the contract).
STANDARD_CRDS = Path("config/crd/standard")


def pinned_version() -> str:
    """The release that tools/gateway-api/go.mod requires (the one place the version is written)."""
    go_mod = (repo_root() / TOOL_DIR / "go.mod").read_text()
    match = re.search(rf"^\s*require\s+{re.escape(MODULE_PATH)}\s+(v\S+)", go_mod, re.MULTILINE)
    if match is None:
        raise BuildError(f"{TOOL_DIR}/go.mod does not require {MODULE_PATH}")
    return match.group(1)


def crd_dir(version: str | None = None) -> Path:
    return cache_root() / "bin" / f"gateway-api-{version or pinned_version()}" / "standard"


def ensure_crds() -> Path:
    """The cached directory of standard-channel CRD YAML, fetched on first use."""
    target = crd_dir()
    if target.is_dir() and any(target.glob("*.yaml")):
        return target
    module_dir = _download_module()
    source = module_dir / STANDARD_CRDS
    files = sorted(source.glob("*.yaml"))
    if not files:
        raise BuildError(f"no CRD YAML under {source}")
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for path in files:
        shutil.copyfile(path, staging / path.name)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def _download_module() -> Path:
    env = dict(os.environ, GOFLAGS="-mod=readonly")
    result = subprocess.run(
        [find_go(), "mod", "download", "-json", MODULE_PATH],
        cwd=repo_root() / TOOL_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:
        info = json.loads(result.stdout or "{}")
    except ValueError:
        info = {}
    if result.returncode != 0 or "Dir" not in info:
        detail = info.get("Error") or result.stderr.strip() or result.stdout.strip()
        raise BuildError(f"`go mod download {MODULE_PATH}` failed in {TOOL_DIR}: {detail}")
    return Path(info["Dir"])
