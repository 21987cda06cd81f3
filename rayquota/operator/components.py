"""The operator's components on one manager, wired explicitly: each `setup` registers on the
manager and returns a typed handle, which the next one is given through its constructor or setup
call. The process around them (the dashboard, the servers, the Lease) is `rayquota.app`'s."""

from __future__ import annotations

from dataclasses import dataclass

from rayquota.operator.config import OperatorConfig
from rayquota.operator.core import Manager
from rayquota.operator.queue import setup as queue_setup
from rayquota.operator.queue.multikueue import setup as multikueue_setup
from rayquota.operator.queue.multikueue.setup import MultiKueueComponent
from rayquota.operator.queue.setup import QueueComponent
from rayquota.operator.ray import setup as ray_setup
from rayquota.operator.ray.raycluster.security_fields import allowed_fields
from rayquota.operator.ray.raycronjob.clock import Clock
from rayquota.operator.ray.setup import RayControllers
from rayquota.operator.webhooks import setup as webhooks_setup
from rayquota.operator.webhooks.setup import WebhookComponent


@dataclass(frozen=True)
class Components:
    ray: RayControllers | None
    """None in admission-only mode: KubeRay's operator reconciles the Ray objects there."""
    queue: QueueComponent | None
    """None in a namespace-only install (no cluster-scoped reads): the Ray reconcilers alone."""
    webhooks: WebhookComponent | None
    multikueue: MultiKueueComponent | None = None
    """The MultiKueue check controller of a manager cluster (multiKueue.enable)."""

    def names(self) -> tuple[str, ...]:
        """The components that run, by the names `rayquota.operator.permissions` declares."""
        present = {
            "ray": self.ray,
            "raycronjob": self.ray.cronjobs if self.ray is not None else None,
            "networkpolicy": self.ray.network_policies if self.ray is not None else None,
            "openshiftroute": self.ray.clusters.routes if self.ray is not None else None,
            "queue": self.queue,
            "webhooks": self.webhooks,
            "multikueue": self.multikueue,
        }
        return tuple(name for name, handle in present.items() if handle is not None)

    def describe(self) -> str:
        """For the start-up log: each component once, the webhooks with where they are served."""
        described = [
            name
            for name in self.names()
            if name not in ("webhooks", "raycronjob", "networkpolicy", "openshiftroute")
        ]
        if self.ray is not None and self.ray.cronjobs is not None:
            described[0] = "ray (with RayCronJob)"
        if self.webhooks is not None:
            described.append(self.webhooks.describe())
        return ", ".join(described)


def setup_components(manager: Manager, config: OperatorConfig, *, clock: Clock | None = None) -> Components:
    """`clock`: the RayCronJob controller's (tests move it); the system clock by default."""
    if not config.reconcilers_enabled and not config.queue_enabled:
        raise ValueError("with the Ray reconcilers and the queue both off there is nothing to run")
    # A RayCronJob's RayJobs are queued like any other: they carry its queue and priority labels.
    queue_labels = config.queue.labels
    inherited = (*queue_labels.queue_label_keys, *queue_labels.priority_label_keys)
    ray = (
        ray_setup.setup(manager, config, clock=clock, inherited_label_keys=inherited)
        if config.reconcilers_enabled
        else None
    )
    queue = queue_setup.setup(manager, ray, config.queue) if config.queue_enabled else None
    if queue is not None and config.webhooks is not None:
        # The webhooks accept what the operator's feature gates turn on (networkPolicy with
        # RayClusterNetworkPolicy), as the reconcilers do, and refuse the rest.
        allowed = allowed_fields(config.feature_gates.enabled)
        webhooks = webhooks_setup.setup(manager, config.webhooks, queue, allowed)
    else:
        webhooks = None
    multikueue = (
        multikueue_setup.setup(manager, queue, config.multikueue)
        if queue is not None and config.multikueue is not None
        else None
    )
    return Components(ray, queue, webhooks, multikueue)
