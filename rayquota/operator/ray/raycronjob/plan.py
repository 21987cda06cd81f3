"""What a RayCronJob needs now, as KubeRay v1.7.0 decides it: a pure function of the object and the
time.

The run due is the first one after `status.lastScheduleTime` (or, before any, after the
object's creation). One RayJob is created per reconcile, for that run: a RayCronJob that missed
runs (the operator was down, or it was suspended) creates one RayJob for each of them in turn,
oldest first, as KubeRay does; the count is reported so nobody is surprised by the burst.

The RayJob is named `<cron>-<minutes since the epoch of its run>`, so creating the same run twice
fails with AlreadyExists instead of making a duplicate. It is owned (controller reference) by the
RayCronJob and carries the RayCronJob's queue and priority-class labels, so under the queue
each RayJob is queued on its own while the RayCronJob itself never is (Kueue's way with CronJobs).
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rayquota.api.ray_v1 import API_VERSION
from rayquota.api.raycronjob_v1 import RayCronJob
from rayquota.operator.core.timestamps import format_rfc3339, parse_rfc3339
from rayquota.operator.ray.raycronjob.validation import schedule_of, validate_raycronjob

CRONJOB_NAME_LABEL = "ray.io/cronjob-name"
SCHEDULED_TIMESTAMP_ANNOTATION = "ray.io/cronjob-scheduled-timestamp"
# Counting the runs still due stops here: the number is only reported.
MISSED_RUNS_COUNTED = 100


@dataclass(frozen=True)
class Invalid:
    errors: tuple[str, ...]


@dataclass(frozen=True)
class Suspended:
    pass


@dataclass(frozen=True)
class Wait:
    next_run: dt.datetime


@dataclass(frozen=True)
class Create:
    rayjob: dict[str, Any]
    scheduled_at: dt.datetime
    next_run: dt.datetime
    # Runs after this one that are already due (at most MISSED_RUNS_COUNTED).
    also_due: int


CronStep = Invalid | Suspended | Wait | Create


def rayjob_name(cron_name: str, scheduled_at: dt.datetime) -> str:
    return f"{cron_name}-{int(scheduled_at.timestamp()) // 60}"


def rayjob_for(
    cron: Mapping[str, Any], scheduled_at: dt.datetime, inherited_label_keys: Sequence[str]
) -> dict[str, Any]:
    meta = cron["metadata"]
    own_labels = meta.get("labels") or {}
    labels = {key: str(own_labels[key]) for key in inherited_label_keys if key in own_labels}
    labels[CRONJOB_NAME_LABEL] = str(meta["name"])
    return {
        "apiVersion": API_VERSION,
        "kind": "RayJob",
        "metadata": {
            "name": rayjob_name(str(meta["name"]), scheduled_at),
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": {SCHEDULED_TIMESTAMP_ANNOTATION: format_rfc3339(scheduled_at)},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": RayCronJob.crd.kind,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": copy.deepcopy(dict(cron["spec"]["jobTemplate"])),
    }


def plan(
    cron: Mapping[str, Any],
    now: dt.datetime,
    *,
    local_zone: dt.tzinfo,
    inherited_label_keys: Sequence[str] = (),
) -> CronStep:
    """`local_zone` is the operator's, for a spec without timeZone; `inherited_label_keys` the
    labels copied from the RayCronJob to each RayJob (the queue's)."""
    errors = validate_raycronjob(cron)
    if errors:
        return Invalid(tuple(errors))
    spec = cron["spec"]
    if spec.get("suspend"):
        return Suspended()
    schedule = schedule_of(cron, local_zone)
    status = cron.get("status") or {}
    since = parse_rfc3339(status.get("lastScheduleTime")) or parse_rfc3339(
        cron["metadata"].get("creationTimestamp")
    )
    if since is None:
        raise ValueError("a stored RayCronJob has a creationTimestamp")
    due = schedule.next_after(since)
    if due > now:
        return Wait(due)
    next_run = schedule.next_after(due)
    also_due, later = 0, next_run
    while later <= now and also_due < MISSED_RUNS_COUNTED:
        also_due += 1
        later = schedule.next_after(later)
    return Create(rayjob_for(cron, due, inherited_label_keys), due, next_run, also_due)
