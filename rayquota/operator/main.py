"""`rayquota run`: the operator process (kopf underneath)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Iterable
from typing import Any

import kopf
from aiohttp import web

from rayquota import __version__
from rayquota.operator.kube import KubeClient
from rayquota.operator.leader import LeaderElector, LeaseSettings, new_identity

log = logging.getLogger("rayquota")

# Modules whose import registers kopf handlers. Each half of the operator adds itself here.
HANDLER_MODULES: tuple[str, ...] = ("rayquota.operator.ray.handlers",)

FINALIZER = "rayquota.io/finalizer"


# Namespace patterns given to `run`; globs ("team-*") need kopf's namespace scanning.
_namespace_patterns: list[str] = []


def configure_settings(settings: kopf.OperatorSettings) -> None:
    """Settings a production operator needs; applied at kopf start-up."""
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="rayquota.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="rayquota.io", key="last-handled-configuration"
    )
    # No kopf peering: with several replicas, the Lease in rayquota.operator.leader decides who runs.
    settings.peering.standalone = True
    # Reconnect watches regularly so a silently dropped connection never stalls reconciliation.
    settings.watching.server_timeout = 120
    settings.watching.client_timeout = 150
    settings.watching.connect_timeout = 10
    settings.watching.reconnect_backoff = 1.0
    settings.networking.request_timeout = 30
    settings.networking.connect_timeout = 10
    # Our reconcilers post their own events; kopf adds only its warnings and errors.
    settings.posting.level = logging.WARNING
    settings.batching.worker_limit = int(os.environ.get("RAYQUOTA_WORKER_LIMIT", "64"))
    settings.batching.idle_timeout = 30
    settings.execution.max_workers = 8
    # We know our resources, so no cluster-wide API scans; namespace globs still need them.
    settings.scanning.disabled = not any(ch in p for p in _namespace_patterns for ch in "*?[!")


@kopf.on.startup()
def _startup(settings: kopf.OperatorSettings, **_: object) -> None:
    configure_settings(settings)
    log.info("rayquota operator %s starting", __version__)


@kopf.on.login()
def _login(**kwargs: object) -> kopf.ConnectionInfo | None:
    """In-cluster service account first, else the kubeconfig KUBECONFIG names at this moment."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)  # type: ignore[arg-type]


def load_handlers(modules: Iterable[str] = HANDLER_MODULES) -> list[str]:
    loaded = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            log.warning("handler module %s is not present; skipping", name)
            continue
        loaded.append(name)
    return loaded


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
    leader_elect: bool = False,
    lease: LeaseSettings | None = None,
) -> int:
    """Run until SIGINT/SIGTERM (or ``stop_flag``). Returns the exit code.

    With ``leader_elect`` the process first waits for the Lease, reconciles only while it holds it,
    and exits with 1 when it loses it (the pod restarts and becomes a standby).
    """
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not verbose:
        # kopf logs every handler success per object at INFO; keep that for --verbose.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
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
    _namespace_patterns[:] = namespaces or []
    loaded = load_handlers()
    log.info("handlers: %s", ", ".join(loaded) or "none")
    _start_metrics(metrics_port, bind)
    scope: dict[str, Any] = {"namespaces": namespaces} if namespaces else {"clusterwide": True}

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        if lease is not None and leader_elect:
            code = loop.run_until_complete(_run_as_leader(lease, scope, bind, health_port, stop_flag))
        else:
            # Without a stop flag kopf stops on SIGINT/SIGTERM itself; tests pass a threading.Event.
            liveness = _liveness_url(bind, health_port)
            loop.run_until_complete(kopf.operator(liveness_endpoint=liveness, stop_flag=stop_flag, **scope))
            code = 0
    finally:
        loop.close()
    log.info("rayquota operator stopped")
    return code


def _liveness_url(bind: str, port: int) -> str | None:
    return f"http://{bind}:{port}/healthz" if port > 0 else None


async def _run_as_leader(
    lease: LeaseSettings,
    scope: dict[str, Any],
    bind: str,
    health_port: int,
    stop_flag: threading.Event | None,
) -> int:
    shutdown = asyncio.Event()
    helpers = [asyncio.create_task(_forward_signals(shutdown))]
    if stop_flag is not None:
        helpers.append(asyncio.create_task(_watch_thread_flag(stop_flag, shutdown)))
    client = KubeClient.from_environment()
    elector = LeaderElector(client, lease, new_identity())
    log.info("leader election: identity %s, lease %s/%s", elector.identity, lease.namespace, lease.name)
    try:
        # A standby must still answer its liveness probe, or Kubernetes would keep restarting it.
        async with _standby_health(bind, health_port):
            if not await elector.acquire(shutdown):
                return 0
        return await _reconcile_while_leading(elector, scope, _liveness_url(bind, health_port), shutdown)
    finally:
        for task in helpers:
            task.cancel()
        await client.close()


async def _reconcile_while_leading(
    elector: LeaderElector, scope: dict[str, Any], liveness: str | None, shutdown: asyncio.Event
) -> int:
    kopf_stop, kopf_ready = asyncio.Event(), asyncio.Event()
    # Our tasks exist before kopf starts, so kopf does not treat them as its own hung tasks at exit.
    holding = asyncio.create_task(elector.hold())
    stopping = asyncio.create_task(shutdown.wait())
    reclaiming = asyncio.create_task(_reclaim_signals(kopf_ready, shutdown))
    operator = asyncio.create_task(
        kopf.operator(liveness_endpoint=liveness, stop_flag=kopf_stop, ready_flag=kopf_ready, **scope)
    )
    # A SIGTERM before kopf is ready goes to kopf's own handler and ends `operator` directly.
    await asyncio.wait({operator, holding, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    reclaiming.cancel()
    lost = holding.done()
    if lost:
        reason = holding.exception() or holding.result()
        log.error("lost leadership (%s); stopping reconciliation", reason)
    else:
        holding.cancel()
    kopf_stop.set()
    # Bounded: after losing the lease, kopf must be gone before a standby may see the lease expire.
    settings = elector.settings
    grace_s = max(1.0, settings.duration_s - settings.renew_deadline_s) if lost else settings.duration_s
    done, _ = await asyncio.wait({operator}, timeout=grace_s)
    failed = False
    if not done:
        log.error("kopf did not stop in %.1fs; abandoning it", grace_s)
        operator.cancel()
        failed = True
    elif operator.exception() is not None:
        log.error("the operator failed", exc_info=operator.exception())
        failed = True
    if lost:
        log.error("exiting with 1 so the pod restarts as a standby")
        return 1
    await elector.release()
    return 1 if failed else 0


async def _forward_signals(shutdown: asyncio.Event) -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, shutdown.set)


async def _reclaim_signals(kopf_ready: asyncio.Event, shutdown: asyncio.Event) -> None:
    """kopf installs its own SIGINT/SIGTERM handlers at start-up; take them back once it is ready, so a
    signal stops kopf through its stop flag (a clean exit) and then releases the lease."""
    await kopf_ready.wait()
    await _forward_signals(shutdown)


async def _watch_thread_flag(flag: threading.Event, shutdown: asyncio.Event) -> None:
    while not flag.is_set():
        await asyncio.sleep(0.2)
    shutdown.set()


@contextlib.asynccontextmanager
async def _standby_health(bind: str, port: int) -> AsyncIterator[None]:
    """/healthz answering 200 while this replica waits for the lease; closed before kopf binds the port."""
    if port <= 0:
        yield
        return
    app = web.Application()
    app.router.add_get("/healthz", _standby_ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, bind, port, reuse_address=True).start()
        yield
    finally:
        await runner.cleanup()


async def _standby_ok(_request: web.Request) -> web.Response:
    return web.json_response({"standby": True})
