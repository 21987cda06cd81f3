"""`rayquota cluster ...` and `rayquota peers ...` subcommands (the peers: `peers` builds from the
module proxy, `kuberay_source` a KubeRay source snapshot)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rayquota import environment
from rayquota.localcluster import binaries, kuberay_source, peers
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


PEERS = ("kuberay", "kueue")


def peers_main(args: argparse.Namespace) -> int:
    """`rayquota peers build kuberay|kueue|all [--source DIR [--tag TAG]]`: build (or reuse) and
    print where things are."""
    source, tag = getattr(args, "source", None), getattr(args, "tag", None)
    if tag is not None and source is None:
        print(
            f"error: --tag {tag} selects a tag of the git repository given by --source DIR", file=sys.stderr
        )
        return 2
    if source is not None and args.peer != "kuberay":
        print(f"error: --source builds KubeRay's operator only, not {args.peer}", file=sys.stderr)
        return 2
    wanted = PEERS if args.peer == "all" else (args.peer,)
    try:
        if source is not None:
            built = kuberay_source.build_from_source(Path(source), tag)
            print(f"{'kuberay-operator':<24} {built.binary}")
            print(f"{'kuberay-crds':<24} {built.crds}")
        elif "kuberay" in wanted:
            print(f"{'kuberay-operator':<24} {peers.build_kuberay()}")
            print(f"{'kuberay-crds':<24} {peers.kuberay_crd_dir()}")
        if "kueue" in wanted:
            for name, path in peers.build_kueue_tools().items():
                print(f"{name:<24} {path}")
            print(f"{'kueue-workdir':<24} {peers.kueue_workdir()}")
            print(f"{'KUBEBUILDER_ASSETS':<24} {peers.envtest_assets()}")
    except binaries.BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
