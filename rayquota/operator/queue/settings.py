"""The queue integration's settings, as the configuration gives them (``rayquota.config``;
Kueue's names): gathered into `rayquota.operator.config.OperatorConfig` and handed to the
queue's `setup`."""

from __future__ import annotations

from dataclasses import dataclass, field

from rayquota.operator.queue.admission.pods_ready import WaitForPodsReady
from rayquota.operator.queue.naming import QueueSettings
from rayquota.queueing.quota.admission_fair_sharing import AdmissionFairSharing
from rayquota.queueing.quota.fairsharing import FairSharing


@dataclass(frozen=True)
class QueueConfig:
    """The queue integration's settings."""

    labels: QueueSettings = field(default_factory=QueueSettings)
    api_mode: str = "rayquota"
    """"rayquota" (rayquota.io/v1alpha1) or "kueue" (Kueue's kueue.x-k8s.io/v1beta2)."""
    fair_sharing: bool | FairSharing = False
    admission_fair_sharing: AdmissionFairSharing | None = None
    """Kueue's admissionFairSharing: usage-based ordering of LocalQueues (``None``: off)."""
    wait_for_pods_ready: WaitForPodsReady | None = None
    frameworks: tuple[str, ...] | None = None
    """Kueue's ``integrations.frameworks``: the optional kinds (JobSet) are queued only when it
    names them; None (unset): every kind rayquota queues."""
