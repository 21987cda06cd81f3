"""What a RayCronJob reports: `status.lastScheduleTime` (KubeRay's only status field) and events.

KubeRay's two event reasons are kept (InvalidRayCronJobSpec, SuspendedRayCronJob); the others
say what a user otherwise finds only in the operator's log.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from rayquota.operator.core.timestamps import format_rfc3339

INVALID_SPEC = "InvalidRayCronJobSpec"
SUSPENDED = "SuspendedRayCronJob"
CREATED_RAYJOB = "CreatedRayJob"
MISSED_RUNS = "MissedSchedules"


def status_after(cron: Mapping[str, Any], scheduled_at: dt.datetime) -> dict[str, Any]:
    """The status once the RayJob of the run at `scheduled_at` exists."""
    return {**(cron.get("status") or {}), "lastScheduleTime": format_rfc3339(scheduled_at)}


def invalid_message(cron: Mapping[str, Any], errors: tuple[str, ...]) -> str:
    meta = cron["metadata"]
    return f"{meta.get('namespace')}/{meta['name']}: " + "; ".join(errors)


def missed_message(also_due: int, capped: bool) -> str:
    count = f"more than {also_due}" if capped else str(also_due)
    return (
        f"{count} more scheduled runs are already due (the operator was down or the RayCronJob was "
        "suspended): one RayJob is created for each, oldest first, as KubeRay does"
    )
