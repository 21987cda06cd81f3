"""`rayquota run`: the operator process, and the composition root above the operator.

It builds the operator's components (`rayquota.operator.components`), the web dashboard and the
servers, and passes each its handles and settings. One asyncio loop runs the manager
(informers, work queues, controllers), a /healthz and /readyz endpoint, and, with leader
election, the Lease: only the holder reconciles, and a holder that loses the Lease exits so its
pod restarts as a standby. The settings were read once, before, by `rayquota.config`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import REGISTRY

from rayquota import __version__
from rayquota.dashboard import main as dashboard_main
from rayquota.dashboard.server import Dashboard
from rayquota.dashboard.settings import DashboardSettings
from rayquota.operator import log_format
from rayquota.operator.components import Components, setup_components
from rayquota.operator.config import OperatorConfig
from rayquota.operator.core import Manager, NamespaceScope
from rayquota.operator.kube import KubeClient
from rayquota.operator.leader import LeaderElector, LeaseSettings, new_identity
from rayquota.operator.queue.kueue.api_group import of_mode
from rayquota.operator.ray.builders import route
from rayquota.operator.ray.raycluster import redis_cleanup
from rayquota.operator.ray.raycronjob.clock import Clock
from rayquota.operator.ray.vocabulary import labels
from rayquota.operator.visibility import setup as visibility_setup
from rayquota.operator.visibility.setup import VisibilityComponent

log = logging.getLogger("rayquota")


@dataclass(frozen=True)
class Application:
    components: Components
    dashboard: Dashboard | None = None
    """The read-only web dashboard, with dashboard.port."""
    visibility: VisibilityComponent | None = None
    """The pending-workloads API (aggregated), when configured and the queue runs."""

    def describe(self) -> str:
        described = self.components.describe()
        if self.visibility is not None:
            described += ", " + self.visibility.describe()
        if self.dashboard is not None:
            described += f", dashboard on {self.dashboard.settings.bind}:{self.dashboard.settings.port}"
        return described


def build(
    manager: Manager,
    config: OperatorConfig,
    dashboard: DashboardSettings | None = None,
    *,
    clock: Clock | None = None,
) -> Application:
    """The operator's components and, beside them on the same manager, the web dashboard."""
    labels.set_created_by(config.created_by)
    redis_cleanup.set_cleanup_enabled(config.gcs_ft_redis_cleanup)
    components = setup_components(manager, config, clock=clock)
    web = None
    if dashboard is not None:
        api = of_mode(config.queue.api_mode)
        claims = components.queue.objects.claims if components.queue is not None else None
        web = dashboard_main.attach(
            manager, dashboard, api, fair_sharing=config.queue.fair_sharing, claims=claims
        )
    visible = None
    if config.visibility is not None and components.queue is not None:
        visible = visibility_setup.setup(manager, config.visibility, components.queue)
    return Application(components, web, visible)


def _start_metrics(port: int, bind: str) -> None:
    if port <= 0:
        return
    from prometheus_client import start_http_server

    start_http_server(port, addr=bind)
    log.info("metrics on http://%s:%d/metrics", bind, port)


def run(
    *,
    config: OperatorConfig,
    namespaces: list[str] | None,
    metrics_port: int,
    health_port: int,
    verbose: bool,
    bind: str = "127.0.0.1",
    stop_flag: threading.Event | None = None,
    ready_flag: threading.Event | None = None,
    leader_elect: bool = False,
    lease: LeaseSettings | None = None,
    dashboard: DashboardSettings | None = None,
    log_format_name: str = "text",
    clock: Clock | None = None,
) -> int:
    """Run until SIGINT/SIGTERM/SIGHUP (or `stop_flag`). Returns the exit code.

    `ready_flag` is set once every cache has synced and the controllers run (tests wait on it);
    `clock` is the RayCronJob controller's (tests move it).
    """
    try:
        log_format.configure(verbose=verbose, log_format=log_format_name)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not os.environ.get("KUBECONFIG") and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        print("error: KUBECONFIG is not set and not running in a cluster", file=sys.stderr)
        return 2
    lease = (lease or LeaseSettings()) if leader_elect else None
    if not config.reconcilers_enabled and not config.queue_enabled:
        print("error: the Ray reconcilers and the queue are both off: nothing to run", file=sys.stderr)
        return 2
    _start_metrics(metrics_port, bind)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        code = loop.run_until_complete(
            _main(
                config=config,
                scope=NamespaceScope.of(namespaces),
                bind=bind,
                health_port=health_port,
                stop_flag=stop_flag,
                ready_flag=ready_flag,
                lease=lease,
                dashboard=dashboard,
                serve_metrics=metrics_port > 0,
                clock=clock,
            )
        )
    finally:
        loop.close()
    log.info("rayquota operator stopped")
    return code


async def _main(
    *,
    config: OperatorConfig,
    scope: NamespaceScope,
    bind: str,
    health_port: int,
    stop_flag: threading.Event | None,
    ready_flag: threading.Event | None,
    lease: LeaseSettings | None,
    dashboard: DashboardSettings | None,
    serve_metrics: bool,
    clock: Clock | None,
) -> int:
    log.info(
        "rayquota operator %s starting (%s)", __version__, "all namespaces" if scope.cluster_wide else scope
    )
    shutdown = asyncio.Event()
    helpers = [asyncio.create_task(_forward_signals(shutdown))]
    if stop_flag is not None:
        helpers.append(asyncio.create_task(_watch_thread_flag(stop_flag, shutdown)))
    client = KubeClient.from_environment()
    config = await _with_openshift(client, config)
    manager = Manager(client, scope, workers=config.workers, resync_interval_s=config.resync_interval_s)
    application = build(manager, config, dashboard, clock=clock)
    components = application.components
    log.info("components: %s", application.describe())
    kuberay_metrics = components.ray.kuberay_metrics if components.ray is not None else None
    if serve_metrics and kuberay_metrics is not None:
        REGISTRY.register(kuberay_metrics)
    if ready_flag is not None:
        helpers.append(asyncio.create_task(_signal_ready(manager, ready_flag)))
    try:
        async with _health_server(bind, health_port, manager):
            if lease is None:
                await manager.run(shutdown)
                return 0
            return await _run_as_leader(manager, client, lease, shutdown)
    finally:
        for task in helpers:
            task.cancel()
        if serve_metrics and kuberay_metrics is not None:
            REGISTRY.unregister(kuberay_metrics)
        await client.close()


async def _with_openshift(client: KubeClient, config: OperatorConfig) -> OperatorConfig:
    """KubeRay looks once, at start-up, whether the API server is OpenShift's (Routes for
    enableIngress); not asked when nothing would change."""
    if config.openshift is not None or not config.reconcilers_enabled or config.use_ingress_on_openshift:
        return config
    groups = (await client.get("/apis") or {}).get("groups") or []
    openshift = route.is_openshift(str(group.get("name")) for group in groups)
    if openshift:
        log.info(
            "OpenShift API groups served: enableIngress makes OpenShift Routes (USE_INGRESS_ON_OPENSHIFT)"
        )
    return dataclasses.replace(config, openshift=openshift)


async def _run_as_leader(
    manager: Manager, client: KubeClient, lease: LeaseSettings, shutdown: asyncio.Event
) -> int:
    elector = LeaderElector(client, lease, new_identity())
    log.info("leader election: identity %s, lease %s/%s", elector.identity, lease.namespace, lease.name)
    if not await elector.acquire(shutdown):
        return 0
    holding = asyncio.create_task(elector.hold())
    stop = asyncio.Event()
    running = asyncio.create_task(manager.run(stop))
    stopping = asyncio.create_task(shutdown.wait())
    await asyncio.wait({running, holding, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    lost = holding.done()
    if lost:
        reason = holding.exception() or holding.result()
        log.error("lost leadership (%s); stopping reconciliation", reason)
    else:
        holding.cancel()
    stop.set()
    # Bounded: after losing the lease, reconciling must end before a standby may see it expire.
    grace_s = max(1.0, lease.duration_s - lease.renew_deadline_s) if lost else lease.duration_s
    done, _ = await asyncio.wait({running}, timeout=grace_s)
    failed = False
    if not done:
        log.error("the controllers did not stop in %.1fs; abandoning them", grace_s)
        running.cancel()
        failed = True
    elif running.exception() is not None:
        log.error("the operator failed", exc_info=running.exception())
        failed = True
    if lost:
        log.error("exiting with 1 so the pod restarts as a standby")
        return 1
    await elector.release()
    return 1 if failed else 0


async def _signal_ready(manager: Manager, flag: threading.Event) -> None:
    await manager.ready.wait()
    flag.set()


async def _forward_signals(shutdown: asyncio.Event) -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    loop = asyncio.get_running_loop()
    # SIGHUP too: a closed terminal is how many a `make run` ends, and it must release the lease.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, shutdown.set)


async def _watch_thread_flag(flag: threading.Event, shutdown: asyncio.Event) -> None:
    while not flag.is_set():
        await asyncio.sleep(0.2)
    shutdown.set()


@contextlib.asynccontextmanager
async def _health_server(bind: str, port: int, manager: Manager) -> AsyncIterator[None]:
    """/healthz: the process and its loop answer (a standby too). /readyz: caches synced and
    controllers running (a standby is not ready)."""
    if port <= 0:
        yield
        return

    async def healthz(_request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def readyz(_request: web.Request) -> web.Response:
        ready = manager.ready.is_set()
        return web.json_response({"ready": ready}, status=200 if ready else 503)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, bind, port, reuse_address=True).start()
        yield
    finally:
        await runner.cleanup()
