"""The command lines of the local control plane's components (pure: no process is started here).

Each server binds to 127.0.0.1; the ports are the caller's (picked free at start-up).
"""

from __future__ import annotations

from pathlib import Path

from rayquota.localcluster.pki import FrontProxyFiles, PkiFiles

SERVICE_CIDR = "10.96.0.0/16"


def etcd_command(binary: Path, data_dir: Path, client_url: str, peer_port: int) -> list[str]:
    peer_url = f"http://127.0.0.1:{peer_port}"
    return [
        str(binary),
        "--name=rayquota",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=rayquota={peer_url}",
        "--unsafe-no-fsync",  # a throwaway test store: durability is not the point
        "--log-level=warn",
    ]


def apiserver_command(
    binary: Path,
    etcd_url: str,
    port: int,
    pki: PkiFiles,
    front_proxy: FrontProxyFiles,
    audit_flags: list[str],
) -> list[str]:
    return [
        str(binary),
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={pki.apiserver_cert}",
        f"--tls-private-key-file={pki.apiserver_key}",
        f"--client-ca-file={pki.ca_cert}",
        "--authorization-mode=RBAC",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # 127.0.0.1 is not a valid endpoint for the `kubernetes` Service.
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        "--profiling=false",
        # The aggregation layer (the operator's pending-workloads API). Not
        # --enable-aggregator-routing: its endpoint resolver refuses the ExternalName
        # Service that points the aggregator at 127.0.0.1.
        *front_proxy.apiserver_flags(),
        *audit_flags,
        "--v=1",
    ]


def _client_flags(kubeconfig: Path, port: int) -> list[str]:
    """Flags shared by the controller-manager and scheduler: admin access, loopback serving."""
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--leader-elect=false",
    ]


def controller_manager_command(binary: Path, kubeconfig: Path, port: int, pki: PkiFiles) -> list[str]:
    return [
        str(binary),
        *_client_flags(kubeconfig, port),
        f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.ca_cert}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route",
        "--concurrent-gc-syncs=5",
        # kwok renews node leases (below); a generous grace period keeps a busy
        # 2-core machine from marking fake nodes NotReady, which would taint them
        # and flip their pods to Ready=False for good.
        "--node-monitor-grace-period=120s",
        "--v=1",
    ]


def scheduler_command(binary: Path, kubeconfig: Path, port: int) -> list[str]:
    return [str(binary), *_client_flags(kubeconfig, port), "--v=1"]


def kwok_command(binary: Path, kubeconfig: Path, config: Path, port: int) -> list[str]:
    """kwok runs the fake nodes (those annotated ``kwok.x-k8s.io/node=fake``) and their pods."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--config={config}",
        "--manage-all-nodes=false",
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        "--cidr=10.244.0.1/16",
        "--node-ip=10.240.0.1",
        "--node-lease-duration-seconds=40",
        f"--server-address=127.0.0.1:{port}",
    ]
