"""Admission fair sharing: LocalQueues of one ClusterQueue take turns by their past usage.

Kueue's ``admissionFairSharing`` (Configuration) with a ClusterQueue's
``admissionScope.admissionMode: UsageBasedAdmissionFairSharing``: each LocalQueue carries its
*consumed resources*, an exponentially decayed average of what its admitted workloads use,
updated every ``usageSamplingInterval`` and halving its weight every ``usageHalfLifeTime``. A
workload admitted adds an *entry penalty* (its requests times the decay of one sampling
interval) at once, so a queue that just admitted does not win the next turn too. The queue's
usage is the sum over resources of ``resourceWeights[r] * amount`` (weight 1 when unlisted),
divided by the LocalQueue's ``fairSharing.weight``; the pending workloads of such a
ClusterQueue are ordered by that usage first, then as usual (priority, creation).

Amounts are milli-units, as everywhere in the engine; times are the caller's clock in seconds.
Nothing here performs I/O: the operator calls :meth:`UsageLedger.sample` on its own schedule
and writes the values into the LocalQueues' status.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_SAMPLING_INTERVAL = 300.0
"""Kueue's default ``usageSamplingInterval`` (5 minutes)."""


@dataclass(frozen=True, slots=True)
class AdmissionFairSharing:
    """The configuration's ``admissionFairSharing`` (durations in seconds)."""

    usage_half_life_time: float = 0.0
    """After this long, past usage counts half; 0 forgets it at every sample."""
    usage_sampling_interval: float = DEFAULT_SAMPLING_INTERVAL
    resource_weights: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.usage_half_life_time < 0 or not math.isfinite(self.usage_half_life_time):
            raise ValueError(
                f"admissionFairSharing.usageHalfLifeTime: {self.usage_half_life_time!r} must be 0 or more"
            )
        if self.usage_sampling_interval <= 0 or not math.isfinite(self.usage_sampling_interval):
            raise ValueError(
                f"admissionFairSharing.usageSamplingInterval: {self.usage_sampling_interval!r} "
                "must be more than 0"
            )
        for resource, weight in self.resource_weights.items():
            if weight < 0 or not math.isfinite(weight):
                raise ValueError(
                    f"admissionFairSharing.resourceWeights[{resource}]: {weight!r} must be 0 or more"
                )

    def entry_penalty(self, requests: Mapping[str, int]) -> dict[str, float]:
        """What admitting ``requests`` adds to its LocalQueue's usage at once."""
        alpha = decay_alpha(self.usage_sampling_interval, self.usage_half_life_time)
        return {r: amount * alpha for r, amount in requests.items() if amount}

    def weighted(self, amounts: Mapping[str, float], queue_weight: float) -> float:
        """A LocalQueue's usage: resource-weighted sum over its weight (infinite at weight 0)."""
        total = 0.0
        for resource in sorted(amounts):
            total += self.resource_weights.get(resource, 1.0) * amounts[resource]
        if queue_weight <= 0:
            return math.inf
        return total / queue_weight


def decay_alpha(elapsed: float, half_life: float) -> float:
    """The share of the newest sample after ``elapsed`` seconds (0 without a half-life, as in
    Kueue: such a queue's usage is reset at every sample and its entry penalties are 0)."""
    if half_life <= 0:
        return 0.0
    return 1.0 - math.pow(0.5, max(0.0, elapsed) / half_life)


def decayed(
    old: Mapping[str, float], current: Mapping[str, int], elapsed: float, half_life: float
) -> dict[str, float]:
    """``old`` moved towards ``current`` by ``elapsed`` seconds of decay."""
    alpha = decay_alpha(elapsed, half_life)
    out: dict[str, float] = {}
    for resource in set(old) | set(current):
        value = old.get(resource, 0.0) * (1.0 - alpha) + current.get(resource, 0) * alpha
        if value:
            out[resource] = value
    return out


@dataclass(slots=True)
class LocalQueueUsage:
    """One LocalQueue's record: Kueue's ``status.fairSharing.admissionFairSharingStatus``."""

    consumed: dict[str, float]
    """The decayed consumed resources (milli-units), penalties settled at the last sample."""
    last_update: float
    penalty: dict[str, float] = field(default_factory=dict)
    """Entry penalties of admissions since the last sample, not yet settled into ``consumed``."""

    def total(self) -> dict[str, float]:
        out = dict(self.consumed)
        for resource, amount in self.penalty.items():
            out[resource] = out.get(resource, 0.0) + amount
        return out


class UsageLedger:
    """Every LocalQueue's consumed usage, and the admission order it sets."""

    def __init__(self, config: AdmissionFairSharing) -> None:
        self.config = config
        self._entries: dict[str, LocalQueueUsage] = {}
        self.generation = 0
        """Bumped whenever some queue's usage changes: an order computed before is stale."""

    def get(self, local_queue: str) -> LocalQueueUsage | None:
        return self._entries.get(local_queue)

    def restore(self, local_queue: str, consumed: Mapping[str, int], last_update: float) -> None:
        """Seed a queue's record from its status (the operator's restart); a record the ledger
        already keeps is newer and wins."""
        if local_queue not in self._entries:
            self._entries[local_queue] = LocalQueueUsage(
                {r: float(v) for r, v in consumed.items() if v}, last_update
            )
            self.generation += 1

    def forget(self, local_queue: str) -> None:
        if self._entries.pop(local_queue, None) is not None:
            self.generation += 1

    def admitted(self, local_queue: str, requests: Mapping[str, int], now: float) -> None:
        """A workload of the queue was admitted: its entry penalty counts from now."""
        entry = self._entries.setdefault(local_queue, LocalQueueUsage({}, now))
        for resource, amount in self.config.entry_penalty(requests).items():
            entry.penalty[resource] = entry.penalty.get(resource, 0.0) + amount
        self.generation += 1

    def usage(self, local_queue: str, queue_weight: float) -> float:
        """The number the queue's workloads are ordered by (smaller first)."""
        entry = self._entries.get(local_queue)
        amounts = entry.total() if entry is not None else {}
        return self.config.weighted(amounts, queue_weight)

    def sample(self, local_queue: str, in_use: Mapping[str, int], now: float) -> LocalQueueUsage:
        """Decay the queue's record towards what its admitted workloads use now and settle its
        penalties; return the record to write into its status."""
        entry = self._entries.setdefault(local_queue, LocalQueueUsage({}, now))
        half_life = self.config.usage_half_life_time
        if half_life <= 0:
            entry.consumed = {}
        else:
            entry.consumed = decayed(entry.consumed, in_use, now - entry.last_update, half_life)
            for resource, amount in entry.penalty.items():
                entry.consumed[resource] = entry.consumed.get(resource, 0.0) + amount
        entry.penalty = {}
        entry.last_update = max(entry.last_update, now)
        self.generation += 1
        return entry
