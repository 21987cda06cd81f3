"""Install the CRDs (and optionally the sample queues) into a cluster."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

from rayquota.localcluster import gateway_api
from rayquota.localcluster.cluster import LocalCluster, run_kubectl
from rayquota.localcluster.paths import repo_root

CRD_APPLY_TIMEOUT_S = 300.0


class Kubectl(Protocol):
    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]: ...


class _EnvKubectl:
    """kubectl against whatever KUBECONFIG names."""

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return run_kubectl(*args, input=input, check=check, timeout=timeout)


def install_crds(target: Kubectl, crd_dir: Path | None = None) -> list[str]:
    """Apply every CRD server-side and wait until each is Established.

    By default: ours, and the Gateway API's standard channel (RayService incremental upgrades
    create Gateways and HTTPRoutes)."""
    dirs = [crd_dir] if crd_dir else [repo_root() / "crds", gateway_api.ensure_crds()]
    if not sorted(dirs[0].glob("*.yaml")):
        raise FileNotFoundError(f"no CRDs in {dirs[0]}: run `rayquota crds`")
    files = [arg for path in dirs for arg in ("-f", str(path))]
    # The ray.io CRDs carry Kubernetes' pod schemas (as KubeRay's do): the API server compiles
    # megabytes of schema, which takes well over a minute on a loaded machine.
    target.kubectl("apply", "--server-side", "--force-conflicts", *files, timeout=CRD_APPLY_TIMEOUT_S)
    names = [line.split("/", 1)[-1] for line in target.kubectl("get", *files, "-o", "name").stdout.split()]
    deadline = time.monotonic() + CRD_APPLY_TIMEOUT_S
    for name in names:
        while True:
            out = target.kubectl(
                "get",
                "crd",
                name,
                "-o",
                "jsonpath={.status.conditions[?(@.type=='Established')].status}",
                check=False,
            ).stdout
            if out == "True":
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not Established after {CRD_APPLY_TIMEOUT_S:.0f}s")
            time.sleep(0.1)
    return names


def install_samples(target: Kubectl) -> None:
    queues = repo_root() / "samples" / "queues"
    if queues.is_dir():
        target.kubectl("apply", "--server-side", "-f", str(queues))


def main(*, samples: bool) -> int:
    if "KUBECONFIG" not in os.environ:
        os.environ["KUBECONFIG"] = str(LocalCluster().kubeconfig)
    target = _EnvKubectl()
    names = install_crds(target)
    print(f"installed {len(names)} CRDs: {', '.join(sorted(names))}", file=sys.stderr)
    if samples:
        install_samples(target)
        print("applied samples/queues", file=sys.stderr)
    return 0
