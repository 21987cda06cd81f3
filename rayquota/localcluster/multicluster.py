"""A manager and its worker clusters on this machine, for MultiKueue: ``rayquota multicluster up``.

Each is a named local control plane (``<prefix>-manager``, ``<prefix>-worker1``, ...) with its
own kwok GPU nodes and the CRDs. The manager is told about its workers the way a platform team
does it: each worker's kubeconfig (certificates embedded) in a Secret of the operator's namespace,
a MultiKueueCluster per worker, a MultiKueueConfig ``workers`` naming them all and the
AdmissionCheck ``multikueue`` using it. Queues are the user's (samples/multicluster/).
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rayquota.localcluster import binaries
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.install import install_crds
from rayquota.localcluster.pki import PkiFiles

SECRET_NAMESPACE = "rayquota-system"
CONFIG_NAME = "workers"
CHECK_NAME = "multikueue"
GROUP = "rayquota.io/v1alpha1"


def embedded_kubeconfig(cluster: LocalCluster) -> str:
    """The cluster's admin kubeconfig with its certificates inside: readable anywhere."""
    pki = PkiFiles.under(cluster.state_dir / "pki")

    def data(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster.name,
                "cluster": {"server": cluster.server, "certificate-authority-data": data(pki.ca_cert)},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": data(pki.admin_cert),
                    "client-key-data": data(pki.admin_key),
                },
            }
        ],
        "contexts": [{"name": cluster.name, "context": {"cluster": cluster.name, "user": "admin"}}],
        "current-context": cluster.name,
    }
    return yaml.safe_dump(config, sort_keys=False)


def worker_manifests(workers: dict[str, str], api_version: str = GROUP) -> list[dict[str, Any]]:
    """Secrets (worker name -> kubeconfig), MultiKueueClusters, the config and the check."""
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SECRET_NAMESPACE}},
    ]
    for name, kubeconfig in workers.items():
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": SECRET_NAMESPACE},
                "stringData": {"kubeconfig": kubeconfig},
            }
        )
        docs.append(
            {
                "apiVersion": api_version,
                "kind": "MultiKueueCluster",
                "metadata": {"name": name},
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": name}}},
            }
        )
    docs.append(
        {
            "apiVersion": api_version,
            "kind": "MultiKueueConfig",
            "metadata": {"name": CONFIG_NAME},
            "spec": {"clusters": sorted(workers)},
        }
    )
    docs.append(
        {
            "apiVersion": api_version,
            "kind": "AdmissionCheck",
            "metadata": {"name": CHECK_NAME},
            "spec": {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {
                    "apiGroup": api_version.split("/")[0],
                    "kind": "MultiKueueConfig",
                    "name": CONFIG_NAME,
                },
            },
        }
    )
    return docs


@dataclass
class MultiCluster:
    prefix: str = "rayquota"
    workers: int = 2
    nodes_file: Path | None = None
    audit: bool = False  # each API server writes an audit log (benchmarks count requests)

    @property
    def manager(self) -> LocalCluster:
        return LocalCluster(name=f"{self.prefix}-manager", nodes_file=self.nodes_file, audit=self.audit)

    @property
    def worker_clusters(self) -> list[LocalCluster]:
        return [
            LocalCluster(name=f"{self.prefix}-worker{i}", nodes_file=self.nodes_file, audit=self.audit)
            for i in range(1, self.workers + 1)
        ]

    def all(self) -> list[LocalCluster]:
        return [self.manager, *self.worker_clusters]

    @staticmethod
    def worker_name(cluster: LocalCluster) -> str:
        """The worker's name in the manager (its MultiKueueCluster): ``worker1``, ..."""
        return cluster.name.rsplit("-", 1)[-1]

    def up(self, *, log: Callable[[str], None] | None = None) -> None:
        """Start (or keep) every cluster, install the CRDs, and connect the manager to the
        workers. The clusters start side by side: most of a start is waiting."""
        say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        clusters = self.all()
        binaries.ensure_all()  # once, here: never several builds side by side
        def start(cluster: LocalCluster) -> None:
            cluster.up(log=say)
            install_crds(cluster)

        with ThreadPoolExecutor(max_workers=len(clusters)) as pool:
            for started in pool.map(start, clusters):
                del started
        workers = {self.worker_name(w): embedded_kubeconfig(w) for w in self.worker_clusters}
        docs = worker_manifests(workers)
        self.manager.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(docs))
        say(
            f"manager {self.manager.name}: MultiKueueClusters {', '.join(sorted(workers))}, "
            f"MultiKueueConfig {CONFIG_NAME}, AdmissionCheck {CHECK_NAME}"
        )

    def down(self, *, purge: bool = False) -> None:
        for cluster in self.all():
            cluster.down(purge=purge)

    def status_lines(self) -> list[str]:
        return [line for cluster in self.all() for line in cluster.status_lines()]

    def healthy(self) -> bool:
        return all(cluster.healthy() for cluster in self.all())

    def env_lines(self) -> list[str]:
        lines = [f"export KUBECONFIG={self.manager.kubeconfig}  # the manager"]
        lines += [f"# {self.worker_name(w)}: KUBECONFIG={w.kubeconfig}" for w in self.worker_clusters]
        return lines
