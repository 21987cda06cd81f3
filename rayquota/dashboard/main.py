"""``rayquota dashboard``: the dashboard as its own process, or attached to the operator's
manager (``rayquota run --dashboard-port``); ``rayquota dashboard token``: a sign-in token for
a read-only viewer ServiceAccount."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Callable

from rayquota.dashboard.access import AccessReviewer
from rayquota.dashboard.cache import DashboardCache
from rayquota.dashboard.server import Dashboard
from rayquota.dashboard.settings import DashboardSettings
from rayquota.dashboard.viewer_rbac import ensure_viewer, request_token
from rayquota.operator.core import Manager, NamespaceScope
from rayquota.operator.kube import KubeClient
from rayquota.operator.queue.dra.context import ClaimSource
from rayquota.operator.queue.kueue.api_group import RAYQUOTA, QueueApi
from rayquota.queueing.quota.fairsharing import FairSharing

log = logging.getLogger("rayquota.dashboard")


def attach(
    manager: Manager,
    settings: DashboardSettings,
    api: QueueApi,
    ready: Callable[[int], None] | None = None,
    *,
    fair_sharing: bool | FairSharing | None = False,
    claims: ClaimSource | None = None,
) -> Dashboard:
    """Register the dashboard's informers on a manager (shared with its controllers, if any) and
    serve it once the caches are synced. `api` and `fair_sharing`: the operator's settings;
    `claims`: the operator's claim source, which the Workload page's demand reads count."""
    cache = DashboardCache.register(manager, api, fair_sharing=fair_sharing, claims=claims)
    dashboard = Dashboard(cache, AccessReviewer(manager.client, ttl_s=settings.review_ttl_s), settings)
    manager.add_runnable("dashboard", lambda: dashboard.serve(ready))
    return dashboard


def _announce(bind: str) -> Callable[[int], None]:
    def ready(port: int) -> None:
        host = "127.0.0.1" if bind in ("127.0.0.1", "0.0.0.0", "") else bind
        print(
            f"dashboard: http://{host}:{port}/  (sign in with a bearer token; "
            "`rayquota dashboard token --url` prints a link with one)",
            file=sys.stderr,
            flush=True,
        )

    return ready


def run(
    *,
    namespaces: list[str] | None,
    settings: DashboardSettings,
    verbose: bool = False,
    stop_flag: threading.Event | None = None,
    ready: Callable[[int], None] | None = None,
    api: QueueApi = RAYQUOTA,
    fair_sharing: bool | FairSharing | None = False,
) -> int:
    """``api`` and ``fair_sharing``: the configuration's queue.api and fairSharing (`rayquota
    dashboard` reads the configuration as `rayquota run` does)."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not os.environ.get("KUBECONFIG") and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        print("error: KUBECONFIG is not set and not running in a cluster", file=sys.stderr)
        return 2
    announce = ready or _announce(settings.bind)
    return asyncio.run(_serve(namespaces, settings, stop_flag, announce, api, fair_sharing))


async def _serve(
    namespaces: list[str] | None,
    settings: DashboardSettings,
    stop_flag: threading.Event | None,
    ready: Callable[[int], None],
    api: QueueApi,
    fair_sharing: bool | FairSharing | None,
) -> int:
    client = KubeClient.from_environment()
    manager = Manager(client, NamespaceScope.of(namespaces))
    attach(manager, settings, api, ready, fair_sharing=fair_sharing)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if threading.current_thread() is threading.main_thread():
        import signal

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
    watcher = asyncio.create_task(_watch_flag(stop_flag, stop)) if stop_flag is not None else None
    try:
        await manager.run(stop)
    finally:
        if watcher is not None:
            watcher.cancel()
        await client.close()
    return 0


async def _watch_flag(flag: threading.Event, stop: asyncio.Event) -> None:
    while not flag.is_set():
        await asyncio.sleep(0.1)
    stop.set()


def token(
    *, namespace: str, service_account: str, duration_s: int, url: str | None, api: QueueApi = RAYQUOTA
) -> int:
    """Make sure the viewer ServiceAccount exists with read-only access, and print a token."""

    async def issue() -> str:
        client = KubeClient.from_environment()
        try:
            await ensure_viewer(client, namespace, service_account, api)
            return await request_token(client, namespace, service_account, duration_s)
        finally:
            await client.close()

    issued = asyncio.run(issue())
    print(f"{url.rstrip('/')}/#token={issued}" if url else issued)
    return 0
