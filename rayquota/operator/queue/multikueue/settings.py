"""The MultiKueue controller's settings (Kueue's ``multiKueue`` configuration), built from the
operator's configuration. The controller runs only where it is switched on (the manager)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from rayquota.operator.queue.multikueue.kubeconfig_safety import DEFAULT_PATH_PREFIX


class Dispatcher(StrEnum):
    ALL_AT_ONCE = "AllAtOnce"
    """Kueue's default: a copy in every connected worker, the first to admit wins."""
    MOST_FREE_QUOTA = "MostFreeQuota"
    """Ours: a copy only in the worker with the most free quota for the workload (how many more
    like it fit there); in every worker when none has room, or when the chosen one has not
    admitted within ``nomination_timeout_s``."""
    INCREMENTAL = "Incremental"
    """Kueue's: the workers in rounds, ``incremental_step`` more (in the config's order) each
    ``incremental_round_s`` while the workload waits; earlier nominees stay nominated."""


@dataclass(frozen=True)
class MultiKueueSettings:
    # Kueue's defaults: a lost worker's workloads are requeued after 5 minutes, orphans in the
    # workers are collected every minute, and the copies' origin label says "multikueue".
    worker_lost_timeout_s: float = 300.0
    gc_interval_s: float = 60.0
    origin: str = "multikueue"
    dispatcher: Dispatcher = Dispatcher.ALL_AT_ONCE
    # Where the workers' kubeconfig Secrets are (the operator's own namespace).
    namespace: str = "rayquota-system"
    # How often a connected worker's API server is asked whether it answers, and how long an
    # answer may take before the worker counts as unreachable.
    probe_interval_s: float = 2.0
    probe_timeout_s: float = 5.0
    nomination_timeout_s: float = 60.0
    # Incremental: how many workers a round adds (Kueue's stepSize, default 3) and how long a
    # round lasts (Kueue's fixed 5 minutes).
    incremental_step: int = 3
    incremental_round_s: float = 300.0
    # Where ``locationType: Path`` kubeconfigs may be read from (Kueue's fixed folder).
    kubeconfig_path_prefix: str = DEFAULT_PATH_PREFIX
