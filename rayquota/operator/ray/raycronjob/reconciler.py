"""The RayCronJob controller: reads the cached object, asks the plan, creates the RayJob it names
and records the run; wakes again when the next run is due (its clock says how long that is)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.operator.core import Manager, ObjectKey, Result, WaitForCache, resources
from rayquota.operator.core.timestamps import format_rfc3339
from rayquota.operator.kube import Conflict
from rayquota.operator.ray.raycluster.reconciler import warn_unimplemented_fields
from rayquota.operator.ray.raycronjob import status as cron_status
from rayquota.operator.ray.raycronjob.clock import Clock
from rayquota.operator.ray.raycronjob.plan import (
    MISSED_RUNS_COUNTED,
    Create,
    Invalid,
    Suspended,
    Wait,
    plan,
)
from rayquota.operator.ray.raycronjob.schedule import time_zone

log = logging.getLogger(__name__)


class RayCronJobReconciler:
    def __init__(
        self,
        manager: Manager,
        *,
        clock: Clock,
        inherited_label_keys: Sequence[str],
        local_zone: dt.tzinfo | None = None,
    ) -> None:
        """`inherited_label_keys`: labels copied from a RayCronJob to its RayJobs (the queue's and
        the priority class's); `local_zone`: for schedules without timeZone (default: this
        process's local zone, as KubeRay's operator uses its own)."""
        self.manager = manager
        self.clock = clock
        self.inherited_label_keys = tuple(inherited_label_keys)
        self.local_zone = local_zone if local_zone is not None else time_zone(None)
        self.cronjobs = manager.informer(resources.RAYCRONJOBS)
        self.controller = manager.controller("raycronjob", self.reconcile)
        self.controller.watch(self.cronjobs)

    async def reconcile(self, key: ObjectKey) -> Result | None:
        cron = self.cronjobs.store.get_key(key)
        if cron is None or cron["metadata"].get("deletionTimestamp"):
            return None
        if self.manager.status.is_stale(cron):
            raise WaitForCache()
        cron = {"apiVersion": resources.RAYCRONJOBS.api_version, "kind": "RayCronJob", **cron}
        step = plan(
            cron, self.clock.now(), local_zone=self.local_zone, inherited_label_keys=self.inherited_label_keys
        )
        # Each RayJob gets the template as its spec: a field its RayJobs will ignore is named on
        # the RayCronJob too, where the user wrote it.
        warn_unimplemented_fields(self.manager, cron)
        recorder = self.manager.recorder
        match step:
            case Invalid(errors):
                log.info("RayCronJob %s is invalid: %s", key, "; ".join(errors))
                recorder.post(
                    cron, "Warning", cron_status.INVALID_SPEC, cron_status.invalid_message(cron, errors)
                )
                return None
            case Suspended():
                recorder.post(
                    cron,
                    "Normal",
                    cron_status.SUSPENDED,
                    "RayCronJob suspended, no new RayJobs will be created",
                )
                return None
            case Wait(next_run):
                return Result(requeue_after_s=self.clock.seconds_until(next_run))
            case Create(rayjob, scheduled_at, next_run, also_due):
                await self._create(cron, rayjob, scheduled_at)
                if also_due:
                    capped = also_due >= MISSED_RUNS_COUNTED
                    recorder.post(
                        cron, "Warning", cron_status.MISSED_RUNS, cron_status.missed_message(also_due, capped)
                    )
                stored = await self.manager.status.write(
                    resources.RAYCRONJOBS, cron, cron_status.status_after(cron, scheduled_at)
                )
                if stored is None:
                    return None
                return Result(requeue_after_s=self.clock.seconds_until(next_run))
        raise AssertionError(f"unknown plan step {step!r}")

    async def _create(
        self, cron: Mapping[str, Any], rayjob: Mapping[str, Any], scheduled_at: dt.datetime
    ) -> None:
        cron_key, name = ObjectKey.of(cron), str(rayjob["metadata"]["name"])
        try:
            await self.manager.client.create(resources.RAYJOBS.path(cron_key.namespace), rayjob)
        except Conflict:
            # The run's name is deterministic: a RayJob of that name is this run's, created by an
            # earlier reconcile whose status write did not land. Record the run and move on.
            log.info("RayCronJob %s: RayJob %s already exists", cron_key, name)
            return
        log.info("RayCronJob %s: created RayJob %s", cron_key, name)
        self.manager.recorder.post(
            cron,
            "Normal",
            cron_status.CREATED_RAYJOB,
            f"Created RayJob {name} for the run scheduled at {format_rfc3339(scheduled_at)}",
        )
