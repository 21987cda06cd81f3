"""Build the peers rayquota is measured against, cached like the control-plane binaries.

- KubeRay's operator (`github.com/ray-project/kuberay/ray-operator` v1.6.2): the side-by-side
  parity script and the operator-scale benchmark run it beside ours. A later release, which the
  module proxy does not serve, is built from a source snapshot (`--source DIR`, kuberay_source).
  The command over both is in localcluster/cli.py.
- Kueue's scheduler performance tools (`runner`, `minimalkueue`, `checker` from
  `sigs.k8s.io/kueue/test/performance/scheduler` at v0.19.2).

Both build through wrapper modules in `tools/` that require the exact version: `go install
module@version` asks the proxy for the module's version list (to check for deprecation), and
the proxy refuses that list for both.

Builds run under `nice -n 19` (`RAYQUOTA_BUILD_NICE` sets another value): the machine they run
on is shared. An interrupted build is resumed, not restarted: go's build cache keeps every
package compiled so far, and only the final links start again. Everything lands in
`cache_root()/bin/<key>-<version>/` through a temporary directory and one rename, so a
half-finished build is never mistaken for a finished one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rayquota import environment
from rayquota.localcluster import binaries
from rayquota.localcluster.paths import cache_root, repo_root

KUBERAY_VERSION = "v1.6.2"
KUBERAY_MODULE = "github.com/ray-project/kuberay/ray-operator"
KUEUE_VERSION = "v0.19.2"
KUEUE_MODULE = "sigs.k8s.io/kueue"
KUEUE_PERF_PACKAGE = f"{KUEUE_MODULE}/test/performance/scheduler"

# Builds yield to everything else on a shared 2-core machine. RAYQUOTA_BUILD_NICE lowers it when
# a build at 19 would never finish under load (`nice` is relative to the caller's own niceness).
NICE = ("nice", "-n", environment.tool_variable("RAYQUOTA_BUILD_NICE") or "19")


def staging_dir(cache_dir: Path) -> Path:
    tmp = cache_dir.with_name(cache_dir.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def publish(tmp: Path, cache_dir: Path) -> None:
    """Move a finished staging directory into place in one rename."""
    shutil.rmtree(cache_dir, ignore_errors=True)
    tmp.rename(cache_dir)


@dataclass(frozen=True)
class PeerBuild(binaries.ToolBuild):
    """A tool module's binaries: `packages` built with `go build`, `test_binaries` with
    `go test -c` (a package that is only a test, run by upstream with `go test`)."""

    test_binaries: dict[str, str] = field(default_factory=dict)

    def binary_names(self) -> list[str]:
        return [*self.packages, *self.test_binaries]

    def is_built(self) -> bool:
        return all(self.path(b).is_file() and os.access(self.path(b), os.X_OK) for b in self.binary_names())


def build(peer: PeerBuild, *, log: bool = True) -> dict[str, Path]:
    """Build a peer's binaries into its cache directory unless they are there; name -> path."""
    paths = {name: peer.path(name) for name in peer.binary_names()}
    if peer.is_built():
        return paths
    go = binaries.find_go()
    started = time.monotonic()
    say(f"building {', '.join(paths)} {peer.version} with go (cached afterwards) ...", log)
    tmp = staging_dir(peer.cache_dir)
    steps = [["build", "-ldflags=-s -w", "-o", str(tmp / n), pkg] for n, pkg in peer.packages.items()]
    steps += [["test", "-c", "-o", str(tmp / n), pkg] for n, pkg in peer.test_binaries.items()]
    try:
        for step in steps:
            go_build(go, step, repo_root() / peer.module_dir, label=peer.key, started=started, log=log)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    publish(tmp, peer.cache_dir)
    say(f"  built in {time.monotonic() - started:.0f}s -> {peer.cache_dir}", log)
    return paths


def go_build(
    go: str, step: list[str], directory: Path, *, label: str, started: float, log: bool, mod: str = "readonly"
) -> None:
    """Run one ``go`` step (``build ...`` or ``test -c ...``) in ``directory``, niced, with progress
    on stderr; ``mod`` is go's ``-mod`` (``mod`` lets go complete go.mod/go.sum from the proxy).
    The one place a peer's go command gets its environment."""
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS=f"-mod={mod} -buildvcs=false")
    cmd = [*NICE, go, step[0], "-trimpath", *step[1:]]
    returncode, stderr = binaries.run_with_progress(
        cmd, cwd=directory, label=label, env=env, started=started, log=log
    )
    if returncode != 0:
        raise binaries.BuildError(f"`{' '.join(cmd)}` failed in {directory}:\n{stderr[-4000:]}")


def say(message: str, log: bool) -> None:
    if log:
        print(message, file=sys.stderr, flush=True)


def escape_module_path(module: str) -> str:
    """The module cache's spelling of a module path: each upper-case letter as `!` + lower."""
    return re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), module)


def module_cache_path(module: str, version: str) -> Path:
    """Where `go` unpacked MODULE@VERSION."""
    gomodcache = subprocess.run(
        [binaries.find_go(), "env", "GOMODCACHE"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return Path(gomodcache) / f"{escape_module_path(module)}@{version}"


def downloaded_module(module: str, version: str) -> Path:
    """MODULE@VERSION in go's module cache, downloaded first unless it is there."""
    out = subprocess.run(
        [binaries.find_go(), "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",  # outside any Go module: the download goes to the module cache only
    ).stdout
    return Path(json.loads(out)["Dir"])


# ---- KubeRay's operator ---------------------------------------------------------------------

KUBERAY = PeerBuild(
    key="kuberay-operator",
    version=KUBERAY_VERSION,
    module_dir="tools/kuberay",
    packages={"kuberay-operator": KUBERAY_MODULE},
)


def build_kuberay(*, log: bool = True) -> Path:
    return build(KUBERAY, log=log)["kuberay-operator"]


def kuberay_binary() -> Path:
    return KUBERAY.path("kuberay-operator")


def kuberay_crd_dir() -> Path:
    """KubeRay's CRD YAML at the pinned version, in the module cache the build filled.

    Apply it with `kubectl apply --server-side` (or `create`): the RayCluster CRD is too large
    for the last-applied-configuration annotation of a client-side apply.
    """
    crds = module_cache_path(KUBERAY_MODULE, KUBERAY_VERSION) / "config" / "crd" / "bases"
    if not crds.is_dir():
        raise binaries.BuildError(f"{crds} is missing: run `rayquota peers build kuberay` first")
    return crds


def kuberay_command(*, metrics_port: int, health_port: int, namespaces: Sequence[str] = ()) -> list[str]:
    """argv for KubeRay's operator on loopback, without leader election.

    Its defaults bind metrics to `:8080` and probes to `:8082` on every interface and take a
    leader Lease; the kubeconfig comes from $KUBECONFIG.
    """
    argv = [
        str(kuberay_binary()),
        f"--metrics-addr=127.0.0.1:{metrics_port}",
        f"--health-probe-bind-address=127.0.0.1:{health_port}",
        "--enable-leader-election=false",
        "--log-stdout-encoder=console",
    ]
    if namespaces:
        argv.append("--watch-namespace=" + ",".join(namespaces))
    return argv


# ---- Kueue's scheduler performance tools ----------------------------------------------------

KUEUE_PERF = PeerBuild(
    key="kueue-perf",
    version=KUEUE_VERSION,
    module_dir="tools/kueue",
    packages={
        "runner": f"{KUEUE_PERF_PACKAGE}/runner",
        "minimalkueue": f"{KUEUE_PERF_PACKAGE}/minimalkueue",
    },
    # The checker is a Go test (checker_test.go only); upstream runs it with `go test`.
    test_binaries={"checker": f"{KUEUE_PERF_PACKAGE}/checker"},
)


def build_kueue_tools(*, log: bool = True) -> dict[str, Path]:
    return build(KUEUE_PERF, log=log)


def kueue_tool(name: str) -> Path:
    return KUEUE_PERF.path(name)


def kueue_workdir() -> Path:
    """A directory holding Kueue's Makefile, CRDs and perf configs at the pinned tag.

    The runner and the checker panic at start unless a `Makefile` sits in or above their
    working directory (Kueue's test utilities look for the project root), so both run here.
    """
    workdir = cache_root() / f"kueue-src-{KUEUE_VERSION}"
    if (workdir / "Makefile").is_file():
        return workdir
    source = module_cache_path(KUEUE_MODULE, KUEUE_VERSION)
    if not source.is_dir():
        raise binaries.BuildError(f"{source} is missing: run `rayquota peers build kueue` first")
    tmp = staging_dir(workdir)
    shutil.copy2(source / "Makefile", tmp / "Makefile")
    for part in ("config/components/crd", "test/performance/scheduler/configs"):
        shutil.copytree(source / part, tmp / part)
    # The module cache is read-only; our copy must stay deletable.
    for path in [tmp, *tmp.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    publish(tmp, workdir)
    return workdir


def kueue_crd_dir() -> Path:
    return kueue_workdir() / "config" / "components" / "crd" / "bases"


def kueue_config(scale: str) -> Path:
    """`baseline` or `large-scale`: the directory with generator.yaml and rangespec.yaml."""
    return kueue_workdir() / "test" / "performance" / "scheduler" / "configs" / scale


def envtest_assets() -> Path:
    """KUBEBUILDER_ASSETS for the runner's envtest: our etcd, kube-apiserver and kubectl.

    envtest looks the binaries up by name in one directory; ours live in one cache directory
    per tool, so this one holds symlinks to them.
    """
    etcd = binaries.ETCD.path("etcd")
    apiserver = binaries.KUBERNETES.path("kube-apiserver")
    kubectl = binaries.KUBERNETES.path("kubectl")
    assets = cache_root() / "bin" / f"envtest-{binaries.K8S_VERSION}-etcd-{binaries.ETCD_VERSION}"
    if all((assets / p.name).resolve() == p for p in (etcd, apiserver, kubectl)):
        return assets
    binaries.ensure_all()
    tmp = staging_dir(assets)
    for target in (etcd, apiserver, kubectl):
        (tmp / target.name).symlink_to(target)
    publish(tmp, assets)
    return assets
