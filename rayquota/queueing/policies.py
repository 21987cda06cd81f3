"""The queue policy vocabulary: the values a ClusterQueue's spec may name.

Declared here, in the pure engine that gives them their meaning, and imported by the API models
(`rayquota.api.queueing_v1alpha1`), which serialise them; the engine never imports the API.
"""

from __future__ import annotations

from enum import StrEnum


class QueueingStrategy(StrEnum):
    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"


class StopPolicy(StrEnum):
    NONE = "None"
    HOLD = "Hold"
    HOLD_AND_DRAIN = "HoldAndDrain"


class WithinClusterQueuePolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class ReclaimWithinCohortPolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class BorrowWithinCohortPolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class WhenCanBorrow(StrEnum):
    BORROW = "Borrow"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class WhenCanPreempt(StrEnum):
    PREEMPT = "Preempt"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class FlavorFungibilityPreference(StrEnum):
    """Which flavor wins when every candidate needs borrowing, preemption or both (Kueue v1beta2)."""

    BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
    """A flavor that needs no preemption first; among equals, the one that does not borrow."""
    PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"
    """A flavor that does not borrow first; among equals, the one that needs no preemption."""


class AdmissionMode(StrEnum):
    """A ClusterQueue's ``admissionScope.admissionMode`` (Kueue v1beta2)."""

    USAGE_BASED_ADMISSION_FAIR_SHARING = "UsageBasedAdmissionFairSharing"
    """Its LocalQueues take turns by their decayed past usage (:mod:`.quota.admission_fair_sharing`)."""
    NO_ADMISSION_FAIR_SHARING = "NoAdmissionFairSharing"
