"""Fake Ray heads that KubeRay's real operator reaches by their Service names, on loopback.

KubeRay's RayService controller asks each cluster's head for its Serve applications at
``http://<cluster>-head-svc.<namespace>.svc.<CLUSTER_DOMAIN>:<dashboard port>`` and goes no
further while that fails (so on kwok it never prepares an upgrade's cluster). Here:

- :class:`HostsFile` is a test-owned hosts file that KubeRay's operator sees as its
  ``/etc/hosts``: the operator runs in a private mount namespace with the file bind-mounted
  over it (:func:`with_hosts_file`); the network stays the host's, so it still reaches the API
  server on 127.0.0.1. Lines are appended in place (same inode: the bind mount keeps showing
  the file), and Go's resolver re-reads the file when its modification time changes.
- :class:`FakeHeads` serves one fake dashboard per cluster, each on its own loopback address
  (all of 127.0.0.0/8 is loopback on Linux) and the one port the clusters' head containers
  name ``dashboard``: an address tells the heads apart. A head's Serve applications are
  DEPLOYING until the test lets it serve, then RUNNING (KubeRay switches traffic to a cluster
  whose applications all run).
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from tests.fake_ray_dashboard import FakeHead, FakeRayDashboard

# KubeRay's default; its operator takes another from $CLUSTER_DOMAIN (not set by these tests).
CLUSTER_DOMAIN = "cluster.local"
APPLICATION = "greeter"


def head_service_fqdn(cluster: str, namespace: str) -> str:
    """The name KubeRay builds for a RayService's cluster's head (no headService override)."""
    return f"{cluster}-head-svc.{namespace}.svc.{CLUSTER_DOMAIN}"


class HostsFile:
    """A hosts file to bind-mount over a process's /etc/hosts."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.write_text("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")

    def add(self, name: str, address: str) -> None:
        with self._lock, self.path.open("a") as out:  # in place: the bind mount shows it
            out.write(f"{address} {name}\n")


def with_hosts_file(command: Sequence[str], hosts: HostsFile) -> list[str]:
    """``command`` run in a private mount namespace whose /etc/hosts is ``hosts``."""
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    script = 'mount --bind "$0" /etc/hosts && exec "$@"'
    namespace = ["unshare", *user, "--mount", "--propagation", "private"]
    return [*namespace, "sh", "-c", script, str(hosts.path), *command]


class FakeHeads(FakeRayDashboard):
    """Fake Ray dashboards, one loopback address per cluster, all on ``port``."""

    def __init__(self, hosts: HostsFile, namespace: str, port: int, first_address: int) -> None:
        super().__init__()
        self.hosts = hosts
        self.namespace = namespace
        self.dashboard_port = port
        self._next = first_address  # the low 24 bits of the next 127.x.y.z tried
        self._by_address: dict[str, str] = {}  # loopback address -> cluster
        self._serving: set[str] = set()
        self._runner: web.AppRunner | None = None

    # --- which head a request is for ---------------------------------------------------------

    def _cluster(self, request: web.Request) -> str:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        address = str(sockname[0]) if sockname else ""
        return self._by_address.get(address, address)

    def _of(self, request: web.Request) -> FakeHead:
        return self.head(self._cluster(request))

    async def _applications(self, request: web.Request) -> web.Response:
        cluster = self._cluster(request)
        config = self._of(request).serve_config or {}
        status = "RUNNING" if cluster in self._serving else "DEPLOYING"
        health = "HEALTHY" if status == "RUNNING" else "UPDATING"
        apps = {
            str(app.get("name") or "default"): {
                "status": status,
                "message": "",
                "deployments": {"Greeter": {"status": health, "message": ""}},
            }
            for app in config.get("applications") or []
        }
        return web.json_response(
            {
                "applications": apps,
                "proxies": {"head": {"status": "HEALTHY"}},
                "target_capacity": config.get("target_capacity"),
            }
        )

    # --- lifecycle ---------------------------------------------------------------------------

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        self._runner = web.AppRunner(self._app(), access_log=None)
        await self._runner.setup()
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self._runner.cleanup()

    async def _listen(self) -> str:
        assert self._runner is not None
        for _ in range(256):
            n, self._next = self._next, self._next + 1
            address = f"127.{(n >> 16) & 0xFF}.{(n >> 8) & 0xFF}.{max(n & 0xFF, 1)}"
            try:
                await web.TCPSite(self._runner, address, self.dashboard_port).start()
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                continue
            return address
        raise RuntimeError(f"no free loopback address for port {self.dashboard_port}")

    def add(self, cluster: str, *, serving: bool = False, namespace: str | None = None) -> str:
        """A head for ``cluster`` (in ``namespace``, by default the one given at start): a
        dashboard on a loopback address of its own, and the hosts line that sends KubeRay
        there. Returns the address."""
        if serving:
            self._serving.add(cluster)
        address = asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(timeout=30)
        self._by_address[address] = cluster
        self.hosts.add(head_service_fqdn(cluster, namespace or self.namespace), address)
        return address

    def serve(self, cluster: str) -> None:
        """From now on the cluster's Serve applications are RUNNING."""
        self._serving.add(cluster)

    def has(self, cluster: str) -> bool:
        return cluster in self._by_address.values()

    def serve_puts(self, cluster: str) -> int:
        """How many Serve configs KubeRay has PUT to the cluster's head."""
        return self.head(cluster).serve_puts
