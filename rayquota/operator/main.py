"""`rayquota run`: the operator process.

One asyncio loop runs the manager (informers, work queues, controllers) of every component, a
/healthz and /readyz endpoint, and, with leader election, the Lease: only the holder reconciles,
and a holder that loses the Lease exits so its pod restarts as a standby.

The components are wired here, explicitly: each `setup` registers on the manager and returns a
typed handle, which the next one is given when it needs it.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from rayquota.operator import log_format
from rayquota.operator.config import OperatorConfig
from rayquota.operator.core import Manager, NamespaceScope
from rayquota.operator.kube import KubeClient
from rayquota.operator.leader import LeaderElector, LeaseSettings, new_identity
from rayquota.operator.queue import setup as queue_setup
from rayquota.operator.queue.multikueue import setup as multikueue_setup
from rayquota.operator.queue.multikueue.setup import MultiKueueComponent
from rayquota.operator.queue.naming import QueueSettings
from rayquota.operator.queue.setup import QueueComponent
from rayquota.operator.ray import setup as ray_setup
from rayquota.operator.ray.raycronjob.clock import Clock
from rayquota.operator.ray.setup import RayControllers
from rayquota.operator.webhooks import setup as webhooks_setup
from rayquota.operator.webhooks.setup import WebhookComponent

log = logging.getLogger("rayquota")


@dataclass(frozen=True)
class Components:
    ray: RayControllers | None
    """None in admission-only mode: KubeRay's operator reconciles the Ray objects there."""
    queue: QueueComponent | None
    """None in a namespace-only install (no cluster-scoped reads): the Ray reconcilers alone."""
    webhooks: WebhookComponent | None
    dashboard: Dashboard | None = None
    """The read-only web dashboard, with --dashboard-port."""
    multikueue: MultiKueueComponent | None = None
    """The MultiKueue check controller of a manager cluster (RAYQUOTA_MULTIKUEUE)."""

    def names(self) -> tuple[str, ...]:
        """The components that run, by the names `rayquota.operator.permissions` declares."""
        present = {
            "ray": self.ray,
            "raycronjob": self.ray.cronjobs if self.ray is not None else None,
            "queue": self.queue,
            "webhooks": self.webhooks,
            "multikueue": self.multikueue,
        }
        return tuple(name for name, handle in present.items() if handle is not None)

    def describe(self) -> str:
        """For the start-up log: each component once, the webhooks with where they are served."""
        described = [name for name in self.names() if name not in ("webhooks", "raycronjob")]
        if self.ray is not None and self.ray.cronjobs is not None:
            described[0] = "ray (with RayCronJob)"
        if self.webhooks is not None:
            described.append(self.webhooks.describe())
        if self.dashboard is not None:
            described.append(f"dashboard on {self.dashboard.settings.bind}:{self.dashboard.settings.port}")
        return ", ".join(described)


def setup_components(manager: Manager, config: OperatorConfig, *, clock: Clock | None = None) -> Components:
    """`clock`: the RayCronJob controller's (tests move it); the system clock by default."""
    if not config.reconcilers_enabled and not config.queue_enabled:
        raise ValueError("with the Ray reconcilers and the queue both off there is nothing to run")
    # A RayCronJob's RayJobs are queued like any other: they carry its queue and priority labels.
    queue_labels = QueueSettings.from_env(os.environ)
    inherited = (*queue_labels.queue_label_keys, *queue_labels.priority_label_keys)
    ray = (
        ray_setup.setup(manager, config, clock=clock, inherited_label_keys=inherited)
        if config.reconcilers_enabled
        else None
    )
    queue = queue_setup.setup(manager, ray) if config.queue_enabled else None
    if queue is not None and config.webhooks is not None:
        webhooks = webhooks_setup.setup(manager, config.webhooks, queue)
    else:
        webhooks = None
    web = config.web_dashboard
    dashboard = dashboard_main.attach(manager, web) if web is not None else None
    multikueue = (
        multikueue_setup.setup(manager, queue, config.multikueue)
        if queue is not None and config.multikueue is not None
        else None
    )
    return Components(ray, queue, webhooks, dashboard, multikueue)


def _start_metrics(port: int, bind: str) -> None:
    if port <= 0:
        return
    from prometheus_client import start_http_server

    start_http_server(port, addr=bind)
    log.info("metrics on http://%s:%d/metrics", bind, port)


def run(
    *,
    namespaces: list[str] | None,
    metrics_port: int,
    health_port: int,
    verbose: bool,
    bind: str | None = None,
    stop_flag: threading.Event | None = None,
    ready_flag: threading.Event | None = None,
    leader_elect: bool = False,
    lease: LeaseSettings | None = None,
    config: OperatorConfig | None = None,
    clock: Clock | None = None,
) -> int:
    """Run until SIGINT/SIGTERM/SIGHUP (or `stop_flag`). Returns the exit code.

    `ready_flag` is set once every cache has synced and the controllers run (tests wait on it);
    `clock` is the RayCronJob controller's (tests move it).
    """
    try:
        log_format.configure(verbose=verbose, log_format=os.environ.get("RAYQUOTA_LOG_FORMAT") or "text")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not os.environ.get("KUBECONFIG") and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        print("error: KUBECONFIG is not set and not running in a cluster", file=sys.stderr)
        return 2
    if leader_elect:
        try:
            lease = lease or LeaseSettings.from_env()
        except ValueError as exc:
            print(f"error: leader election: {exc}", file=sys.stderr)
            return 2
    bind = bind or os.environ.get("RAYQUOTA_BIND_ADDRESS", "127.0.0.1")
    try:
        config = config or OperatorConfig.from_env()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
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
                lease=lease if leader_elect else None,
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
    manager = Manager(client, scope, workers=config.workers, resync_interval_s=config.resync_interval_s)
    components = setup_components(manager, config, clock=clock)
    log.info("components: %s", components.describe())
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
