"""What an object not admitted is told when its gate is shut (again)."""

from __future__ import annotations

from rayquota.operator.core.cache.store import Obj
from rayquota.operator.queue.adapters.record_helpers import gate_cleared_by_hand


def gate_shut_event(obj: Obj, queue: str | None) -> tuple[str, str, str]:
    """(type, reason, message): a Warning when someone cleared the gate by hand (that does not
    bypass the quota), else the Normal word that the object waits for its LocalQueue."""
    if gate_cleared_by_hand(obj):
        return (
            "Warning",
            "QuotaGateReasserted",
            "the object is not admitted; suspend was set again (clearing it does not bypass the quota)",
        )
    return "Normal", "Queued", f"suspended until LocalQueue {queue} admits it"
