"""Build the peers rayquota is measured against, cached like the control-plane binaries.

- KubeRay's operator (`go install github.com/ray-project/kuberay/ray-operator@v1.6.2`): the
  side-by-side parity script and the operator-scale benchmark run it beside ours.
- Kueue's scheduler performance tools (`runner`, `minimalkueue`, `checker` from
  `sigs.k8s.io/kueue/test/performance/scheduler` at v0.19.2), built through the wrapper module
  `tools/kueue`: the proxy refuses Kueue's version list, so `go install ...@v0.19.2` fails.

Builds run under `nice -n 19`: the machine they run on is shared. Everything lands in
`cache_root()/bin/<key>-<version>/` through a temporary directory and one rename, so a
half-finished build is never mistaken for a finished one.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from rayquota.localcluster import binaries
from rayquota.localcluster.paths import cache_root, repo_root

KUBERAY_VERSION = "v1.6.2"
KUBERAY_MODULE = "github.com/ray-project/kuberay/ray-operator"
KUEUE_VERSION = "v0.19.2"
KUEUE_MODULE = "sigs.k8s.io/kueue"
KUEUE_PERF_PACKAGE = f"{KUEUE_MODULE}/test/performance/scheduler"

# Builds yield to everything else on a shared 2-core machine.
NICE = ("nice", "-n", "19")


def _staging(cache_dir: Path) -> Path:
    tmp = cache_dir.with_name(cache_dir.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def _publish(tmp: Path, cache_dir: Path) -> None:
    """Move a finished staging directory into place in one rename."""
    shutil.rmtree(cache_dir, ignore_errors=True)
    tmp.rename(cache_dir)


def _go(
    args: Sequence[str], *, cwd: Path, label: str, env: dict[str, str], started: float, log: bool
) -> None:
    cmd = [*NICE, binaries.find_go(), *args]
    returncode, stderr = binaries.run_with_progress(
        cmd, cwd=cwd, label=label, env=env, started=started, log=log
    )
    if returncode != 0:
        raise binaries.BuildError(f"`{' '.join(cmd)}` failed in {cwd}:\n{stderr[-4000:]}")


def _say(message: str, log: bool) -> None:
    if log:
        print(message, file=sys.stderr, flush=True)


def module_cache_path(module: str, version: str) -> Path:
    """Where `go` unpacked MODULE@VERSION (upper-case letters are escaped as `!` + lower)."""
    gomodcache = subprocess.run(
        [binaries.find_go(), "env", "GOMODCACHE"], capture_output=True, text=True, check=True
    ).stdout.strip()
    escaped = re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), module)
    return Path(gomodcache) / f"{escaped}@{version}"


# ---- KubeRay's operator ---------------------------------------------------------------------

KUBERAY_DIR_KEY = "kuberay-operator"
KUBERAY_BINARY = "kuberay-operator"


def kuberay_dir() -> Path:
    return cache_root() / "bin" / f"{KUBERAY_DIR_KEY}-{KUBERAY_VERSION}"


def kuberay_binary() -> Path:
    return kuberay_dir() / KUBERAY_BINARY


def build_kuberay(*, log: bool = True) -> Path:
    """`go install` KubeRay's operator at the pinned version (once; cached afterwards)."""
    target = kuberay_binary()
    if target.is_file() and os.access(target, os.X_OK):
        return target
    started = time.monotonic()
    _say(f"building kuberay-operator {KUBERAY_VERSION} with go install (cached afterwards) ...", log)
    tmp = _staging(kuberay_dir())
    env = dict(os.environ, CGO_ENABLED="0", GOBIN=str(tmp), GOFLAGS="-buildvcs=false")
    try:
        with tempfile.TemporaryDirectory() as outside_any_module:
            _go(
                ["install", "-trimpath", "-ldflags=-s -w", f"{KUBERAY_MODULE}@{KUBERAY_VERSION}"],
                cwd=Path(outside_any_module),
                label="kuberay-operator",
                env=env,
                started=started,
                log=log,
            )
        (tmp / "ray-operator").rename(tmp / KUBERAY_BINARY)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _publish(tmp, kuberay_dir())
    _say(f"  built in {time.monotonic() - started:.0f}s -> {target}", log)
    return target


def kuberay_crd_dir() -> Path:
    """KubeRay's CRD YAML at the pinned version, as `go install` left it in the module cache.

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

KUEUE_TOOLS_MODULE_DIR = "tools/kueue"
KUEUE_GO_BUILT = {
    "runner": f"{KUEUE_PERF_PACKAGE}/runner",
    "minimalkueue": f"{KUEUE_PERF_PACKAGE}/minimalkueue",
}
# The checker is a Go test (checker_test.go only); upstream runs it with `go test`.
KUEUE_CHECKER = ("checker", f"{KUEUE_PERF_PACKAGE}/checker")


def kueue_tools_dir() -> Path:
    return cache_root() / "bin" / f"kueue-perf-{KUEUE_VERSION}"


def kueue_tool(name: str) -> Path:
    return kueue_tools_dir() / name


def build_kueue_tools(*, log: bool = True) -> dict[str, Path]:
    """Build runner and minimalkueue (`go build`) and the checker (`go test -c`) once."""
    names = [*KUEUE_GO_BUILT, KUEUE_CHECKER[0]]
    paths = {name: kueue_tool(name) for name in names}
    if all(p.is_file() and os.access(p, os.X_OK) for p in paths.values()):
        return paths
    started = time.monotonic()
    _say(f"building Kueue's {', '.join(names)} {KUEUE_VERSION} with go (cached afterwards) ...", log)
    tmp = _staging(kueue_tools_dir())
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=readonly -buildvcs=false")
    module_dir = repo_root() / KUEUE_TOOLS_MODULE_DIR
    name, package = KUEUE_CHECKER
    steps = (
        (["build", "-trimpath", "-ldflags=-s -w", "-o", str(tmp) + "/", *KUEUE_GO_BUILT.values()], "kueue"),
        (["test", "-c", "-trimpath", "-o", str(tmp / name), package], "kueue checker"),
    )
    try:
        for args, label in steps:
            _go(args, cwd=module_dir, label=label, env=env, started=started, log=log)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _publish(tmp, kueue_tools_dir())
    _say(f"  built in {time.monotonic() - started:.0f}s -> {kueue_tools_dir()}", log)
    return paths


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
    tmp = _staging(workdir)
    shutil.copy2(source / "Makefile", tmp / "Makefile")
    for part in ("config/components/crd", "test/performance/scheduler/configs"):
        shutil.copytree(source / part, tmp / part)
    # The module cache is read-only; our copy must stay deletable.
    for path in [tmp, *tmp.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    _publish(tmp, workdir)
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
    tmp = _staging(assets)
    for target in (etcd, apiserver, kubectl):
        (tmp / target.name).symlink_to(target)
    _publish(tmp, assets)
    return assets


# ---- `rayquota peers ...` -------------------------------------------------------------------

PEERS = ("kuberay", "kueue")


def main(args: argparse.Namespace) -> int:
    """`rayquota peers build kuberay|kueue|all`: build (or reuse) and print where things are."""
    wanted = PEERS if args.peer == "all" else (args.peer,)
    try:
        if "kuberay" in wanted:
            print(f"{'kuberay-operator':<24} {build_kuberay()}")
            print(f"{'kuberay-crds':<24} {kuberay_crd_dir()}")
        if "kueue" in wanted:
            for name, path in build_kueue_tools().items():
                print(f"{name:<24} {path}")
            print(f"{'kueue-workdir':<24} {kueue_workdir()}")
            print(f"{'KUBEBUILDER_ASSETS':<24} {envtest_assets()}")
    except binaries.BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
