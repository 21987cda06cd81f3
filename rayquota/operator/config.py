"""The operator's settings, as its components take them: built once at start by
`rayquota.config` from the configuration file and its overrides, and passed in. Each component's
own settings live beside it (the Ray reconcilers' `RaySettings`, the queue's `QueueConfig`, ...);
this gathers them, and the components' wiring (`components.py`) hands each its part."""

from __future__ import annotations

from dataclasses import dataclass, field

from rayquota.operator.queue.multikueue.settings import MultiKueueSettings
from rayquota.operator.queue.settings import QueueConfig
from rayquota.operator.ray.settings import RaySettings
from rayquota.operator.visibility.settings import VisibilitySettings
from rayquota.operator.webhook_settings import WebhookSettings


@dataclass(frozen=True)
class OperatorConfig(RaySettings):
    """The Ray reconcilers' settings (`RaySettings`, KubeRay's) and the rest of the operator's."""

    # How often every cached object is looked at again without a watch event (seconds); only a
    # safety net for lost events, never the way work gets done.
    resync_interval_s: float = 600.0
    # Concurrent reconciles per controller.
    workers: int = 8
    # False: admission-only mode beside KubeRay's own operator. Our Ray reconcilers stay off and
    # the queue integration gates KubeRay's objects through spec.suspend alone.
    reconcilers_enabled: bool = True
    # The admission webhooks: None serves none (the gate still holds: the reconcilers re-assert
    # it and the planner creates no pod beyond the admitted caps).
    webhooks: WebhookSettings | None = None
    # The queue integration (and with it the webhooks). Off for a namespace-only install, whose
    # ServiceAccount may not read the cluster-scoped queue configuration (ClusterQueues, ...).
    queue_enabled: bool = True
    # The MultiKueue check controller (a manager cluster's dispatch to its workers); None: off.
    multikueue: MultiKueueSettings | None = None
    queue: QueueConfig = field(default_factory=QueueConfig)
    # The pending-workloads API (aggregated); None: not served (rayquota run turns it on against
    # the local control plane).
    visibility: VisibilitySettings | None = None
