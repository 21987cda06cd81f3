"""`rayquota run`: the operator process (kopf underneath)."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys
import threading
from collections.abc import Iterable

import kopf

from rayquota import __version__

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
    # Single active replica; the Helm chart runs one pod with a Recreate strategy.
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
) -> int:
    """Run until SIGINT/SIGTERM (or ``stop_flag``). Returns the exit code."""
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
    bind = bind or os.environ.get("RAYQUOTA_BIND_ADDRESS", "127.0.0.1")
    _namespace_patterns[:] = namespaces or []
    loaded = load_handlers()
    log.info("handlers: %s", ", ".join(loaded) or "none")
    _start_metrics(metrics_port, bind)
    liveness = f"http://{bind}:{health_port}/healthz" if health_port > 0 else None
    scope = {"namespaces": namespaces} if namespaces else {"clusterwide": True}

    # Without a stop flag kopf stops on SIGINT/SIGTERM itself; tests pass a threading.Event.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(
            kopf.operator(
                liveness_endpoint=liveness,
                stop_flag=stop_flag,
                **scope,  # type: ignore[arg-type]
            )
        )
    finally:
        loop.close()
    log.info("rayquota operator stopped")
    return 0
