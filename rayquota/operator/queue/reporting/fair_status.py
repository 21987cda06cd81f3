"""Fair sharing in the queues' status and metrics, as Kueue writes them.

- ClusterQueues and Cohorts: ``status.fairSharing.weightedShare`` (Kueue's integer: the share
  rounded up, 2^63-1 when a node of weight 0 borrows) and the gauges
  ``kueue_cluster_queue_weighted_share`` / ``kueue_cohort_weighted_share`` (the share unrounded,
  NaN for that infinite one), while fair sharing is on (the families are in ``kueue_metrics``).
- LocalQueues under admission fair sharing: ``status.fairSharing.admissionFairSharingStatus``
  (``consumedResources``, ``lastUpdate``), sampled every ``usageSamplingInterval``, and the gauge
  ``kueue_local_queue_admission_fair_sharing_usage``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping
from typing import Any

from rayquota.operator.core.timestamps import format_rfc3339
from rayquota.operator.queue.reporting import kueue_metrics
from rayquota.queueing import Engine, LocalQueueUsage, format_quantity, parse_quantity

MAX_SHARE = (1 << 63) - 1
"""Kueue's weightedShare of a node of weight 0 that borrows."""


def weighted_share(share: float) -> int:
    """Kueue's ``status.fairSharing.weightedShare``."""
    return MAX_SHARE if math.isinf(share) else math.ceil(share)


class FairSharingStatus:
    """Per status pass: the shares of every node (with fair sharing on) and, every sampling
    interval, the LocalQueues' consumed usage (with admission fair sharing configured)."""

    def __init__(self, engine: Engine, wall_clock: Callable[[], float]) -> None:
        self.engine = engine
        self.wall_clock = wall_clock
        self.shares: dict[tuple[bool, str], float] = {}
        self._next_sample: float | None = None

    def refresh(self, cohort_of: Mapping[str, str]) -> None:
        """``cohort_of``: each ClusterQueue's cohort (the gauge's label)."""
        if self.engine.fair_sharing:
            self.shares = self.engine.weighted_shares()
            self._observe_shares(cohort_of)
        ledger = self.engine.admission_usage
        if ledger is None:
            return
        now = self.wall_clock()
        if self._next_sample is None or now >= self._next_sample:
            self.engine.sample_admission_usage(now)
            self._next_sample = now + ledger.config.usage_sampling_interval

    def _observe_shares(self, cohort_of: Mapping[str, str]) -> None:
        for (is_cluster_queue, name), share in self.shares.items():
            value = math.nan if math.isinf(share) else share
            if is_cluster_queue:
                kueue_metrics.observe_cluster_queue_weighted_share(name, cohort_of.get(name, ""), value)
            else:
                kueue_metrics.observe_cohort_weighted_share(name, value)

    def node_status(self, is_cluster_queue: bool, name: str) -> dict[str, Any] | None:
        """``status.fairSharing`` of a ClusterQueue or Cohort (``None``: fair sharing is off)."""
        if not self.engine.fair_sharing:
            return None
        return {"weightedShare": weighted_share(self.shares.get((is_cluster_queue, name), 0.0))}

    def local_queue_status(self, local_queue: Mapping[str, Any]) -> dict[str, Any] | None:
        """``status.fairSharing`` of a LocalQueue whose usage the engine keeps."""
        meta, spec = local_queue["metadata"], local_queue.get("spec") or {}
        namespace, name = str(meta["namespace"]), str(meta["name"])
        usage = self.engine.local_queue_usage(f"{namespace}/{name}")
        ledger = self.engine.admission_usage
        if usage is None or ledger is None:
            return None
        weight = local_queue_weight(spec)
        cluster_queue = str(spec.get("clusterQueue") or "")
        kueue_metrics.observe_admission_fair_sharing_usage(
            name,
            namespace,
            cluster_queue,
            ledger.config.weighted({r: v / 1000 for r, v in usage.total().items()}, weight),
        )
        return {"weightedShare": 0, "admissionFairSharingStatus": consumed_status(usage)}


def local_queue_weight(spec: Mapping[str, Any]) -> float:
    """``spec.fairSharing.weight`` (default 1)."""
    weight = (spec.get("fairSharing") or {}).get("weight")
    return 1.0 if weight is None else parse_quantity(str(weight)) / 1000


def consumed_status(usage: LocalQueueUsage) -> dict[str, Any]:
    moment = dt.datetime.fromtimestamp(usage.last_update, dt.UTC)
    return {
        "consumedResources": {r: format_quantity(round(v), r) for r, v in sorted(usage.consumed.items())},
        "lastUpdate": format_rfc3339(moment),
    }


def restore_consumed(engine: Engine, local_queue: Mapping[str, Any]) -> None:
    """A LocalQueue's recorded consumed usage seeds the engine's (the operator's restart)."""
    afs = ((local_queue.get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus")
    if not afs or engine.admission_usage is None:
        return
    consumed = {str(r): parse_quantity(str(q)) for r, q in (afs.get("consumedResources") or {}).items()}
    try:
        stamp = dt.datetime.fromisoformat(str(afs.get("lastUpdate")).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return
    meta = local_queue["metadata"]
    engine.restore_local_queue_usage(f"{meta['namespace']}/{meta['name']}", consumed, stamp)
