"""kopf handlers for ray.io/v1 RayCluster and RayJob: thin shells around the reconcilers.

Each object gets a daemon that reconciles it whenever it is poked (a watch event on the object,
on one of its pods, or on a child object) and at least every `resync_interval_s`. The reconcile
itself always starts from the live objects, so missed or repeated pokes do no harm.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import kopf

from rayquota.operator.config import OperatorConfig
from rayquota.operator.kube import KubeClient
from rayquota.operator.ray import labels
from rayquota.operator.ray.raycluster import RayClusterReconciler
from rayquota.operator.ray.rayjob import RayJobReconciler
from rayquota.operator.ray.resolver import DashboardResolver, resolver_from_settings

log = logging.getLogger(__name__)

RAYCLUSTER = ("ray.io", "v1", "rayclusters")
RAYJOB = ("ray.io", "v1", "rayjobs")


@dataclass
class Runtime:
    config: OperatorConfig
    kube: KubeClient
    resolver: DashboardResolver
    clusters: RayClusterReconciler
    jobs: RayJobReconciler
    pokes: dict[tuple[str, str, str], asyncio.Event] = field(default_factory=dict)

    def poke(self, kind: str, namespace: str | None, name: str | None) -> None:
        if namespace and name and (event := self.pokes.get((kind, namespace, name))) is not None:
            event.set()


_runtime: Runtime | None = None
_config_override: OperatorConfig | None = None


def configure(config: OperatorConfig) -> None:
    """Use these settings instead of the environment's (call before the operator starts)."""
    global _config_override
    _config_override = config


def runtime() -> Runtime:
    if _runtime is None:
        raise RuntimeError("the Ray handlers are not started")
    return _runtime


@kopf.on.startup()
async def start_ray_runtime(**_: Any) -> None:
    global _runtime
    config = _config_override or OperatorConfig.from_env()
    kube = KubeClient.from_environment()
    resolver = resolver_from_settings(
        config.dashboard_resolver, config.dashboard_map_file, config.dashboard_url
    )
    _runtime = Runtime(
        config=config,
        kube=kube,
        resolver=resolver,
        clusters=RayClusterReconciler(kube, config),
        jobs=RayJobReconciler(kube, config, resolver),
    )
    log.info(
        "Ray reconcilers started (version %s, dashboard resolver %s)",
        config.version,
        config.dashboard_resolver,
    )


@kopf.on.cleanup()
async def stop_ray_runtime(**_: Any) -> None:
    global _runtime
    if _runtime is not None:
        await _runtime.jobs.close()
        await _runtime.kube.close()
        _runtime = None


async def _reconcile_loop(
    kind: str,
    namespace: str,
    name: str,
    stopped: kopf.DaemonStopped,
    reconcile: Callable[[str, str], Awaitable[Any]],
) -> None:
    rt = runtime()
    key = (kind, namespace, name)
    poke = rt.pokes.setdefault(key, asyncio.Event())
    failures = 0
    try:
        while not stopped:
            poke.clear()
            delay = rt.config.resync_interval_s
            try:
                result = await reconcile(namespace, name)
                failures = 0
                if result.requeue_after_s is not None:
                    delay = min(delay, result.requeue_after_s)
            except asyncio.CancelledError:
                raise
            except Exception:
                failures += 1
                delay = min(rt.config.resync_interval_s, 0.5 * 2**failures)
                log.exception("reconciling %s %s/%s failed (attempt %d)", kind, namespace, name, failures)
            await _wait_for_poke(poke, stopped, delay)
    finally:
        if rt.pokes.get(key) is poke:
            del rt.pokes[key]


async def _wait_for_poke(poke: asyncio.Event, stopped: kopf.DaemonStopped, timeout: float) -> None:
    async def stop_requested() -> None:
        await stopped.wait()

    waiters = [asyncio.ensure_future(poke.wait()), asyncio.ensure_future(stop_requested())]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


# --- RayCluster ---------------------------------------------------------------------------------


@kopf.daemon(*RAYCLUSTER, cancellation_timeout=10.0)
async def raycluster_daemon(name: str, namespace: str | None, stopped: kopf.DaemonStopped, **_: Any) -> None:
    if namespace:
        await _reconcile_loop("RayCluster", namespace, name, stopped, runtime().clusters.reconcile)


@kopf.on.event(*RAYCLUSTER)
async def raycluster_event(name: str, namespace: str | None, meta: kopf.Meta, **_: Any) -> None:
    rt = runtime()
    rt.poke("RayCluster", namespace, name)
    # A RayJob follows its cluster's status: poke the parent too.
    parent_labels = meta.get("labels") or {}
    if parent_labels.get(labels.ORIGINATED_FROM_CRD) == "RayJob":
        rt.poke("RayJob", namespace, parent_labels.get(labels.ORIGINATED_FROM_CR_NAME))


@kopf.on.event("", "v1", "pods", labels={labels.CREATED_BY: labels.CREATED_BY_VALUE})
async def ray_pod_event(namespace: str | None, meta: kopf.Meta, **_: Any) -> None:
    cluster = (meta.get("labels") or {}).get(labels.RAY_CLUSTER)
    runtime().poke("RayCluster", namespace, cluster)


# --- RayJob -------------------------------------------------------------------------------------


@kopf.daemon(*RAYJOB, cancellation_timeout=10.0)
async def rayjob_daemon(name: str, namespace: str | None, stopped: kopf.DaemonStopped, **_: Any) -> None:
    if namespace:
        await _reconcile_loop("RayJob", namespace, name, stopped, runtime().jobs.reconcile)


@kopf.on.event(*RAYJOB)
async def rayjob_event(name: str, namespace: str | None, **_: Any) -> None:
    runtime().poke("RayJob", namespace, name)


@kopf.on.event("batch", "v1", "jobs", labels={labels.ORIGINATED_FROM_CRD: "RayJob"})
async def submitter_job_event(namespace: str | None, meta: kopf.Meta, **_: Any) -> None:
    runtime().poke("RayJob", namespace, (meta.get("labels") or {}).get(labels.ORIGINATED_FROM_CR_NAME))


@kopf.on.delete(*RAYJOB)
async def rayjob_deleted(name: str, namespace: str | None, body: kopf.Body, **_: Any) -> None:
    """Stop the Ray job before the RayJob (and, through ownership, its cluster) goes away."""
    await runtime().jobs.finalize(dict(body))
