"""`rayquota cluster ...` subcommands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rayquota.config import environment
from rayquota.localcluster import binaries
from rayquota.localcluster.cluster import ClusterError, LocalCluster

PLUGIN = "kubectl-rayquota"


def path_additions(scripts_dir: Path | None = None) -> list[str]:
    """What `cluster env` puts on PATH: kubectl and helm, and the directory of this
    installation's scripts when it holds the kubectl plugin (so `kubectl rayquota` works)."""
    scripts = scripts_dir or Path(sys.executable).parent
    dirs = [str(binaries.KUBERNETES.cache_dir), str(binaries.HELM.cache_dir)]
    return dirs + ([str(scripts)] if (scripts / PLUGIN).exists() else [])


def main(args: argparse.Namespace) -> int:
    nodes = environment.tool_variable("RAYQUOTA_NODES_FILE")
    cluster = LocalCluster(name=args.name, nodes_file=Path(nodes) if nodes else None)
    try:
        match args.cluster_command:
            case "build":
                binaries.ensure_all()
                for name, path in binaries.binary_paths().items():
                    print(f"{name:<24} {path}")
            case "up":
                cluster.up()
            case "down":
                cluster.down(purge=args.purge)
            case "status":
                print("\n".join(cluster.status_lines()))
                return 0 if cluster.healthy() else 3
            case "env":
                print(f"export KUBECONFIG={cluster.kubeconfig}")
                print(f"export PATH={':'.join(path_additions())}:$PATH")
            case "kubeconfig":
                print(cluster.kubeconfig)
    except (ClusterError, binaries.BuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
