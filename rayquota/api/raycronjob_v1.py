"""``ray.io/v1`` RayCronJob: a RayJob created on a cron schedule, with KubeRay v1.7's fields.

Its own module (the kind is new in KubeRay v1.6 and independent of the cluster types); the job
template is the RayJob's spec model, so a template is checked exactly as a RayJob is.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import ConfigDict, Field, JsonValue

from rayquota.api.common import CrdInfo, K8sModel, KubeObject, PrinterColumn
from rayquota.api.ray_v1 import GROUP, VERSION, RayJobSpec

# The child RayJob is named `<name>-<minutes since the epoch>` (up to 10 digits and a dash), and
# a RayJob's name is capped at 47 (its cluster's name adds a suffix): 47 - 11.
MAX_RAYCRONJOB_NAME = 36

# Checked by the API server at creation (KubeRay refuses both later, in its reconciler).
_NAME_FITS: dict[str, JsonValue] = {
    "rule": f"!has(self.metadata.name) || self.metadata.name.size() <= {MAX_RAYCRONJOB_NAME}",
    "message": f"RayCronJob name should be no more than {MAX_RAYCRONJOB_NAME} characters",
}
_NO_TZ_IN_SCHEDULE: dict[str, JsonValue] = {
    "rule": "!self.schedule.contains('TZ')",
    "message": "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
    "fieldPath": ".schedule",
}


class RayCronJobSpec(K8sModel):
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [_NO_TZ_IN_SCHEDULE]})

    job_template: RayJobSpec
    # Five cron fields or a descriptor (@hourly, @every 90m, ...), as robfig/cron's standard parser.
    schedule: str
    # An IANA zone name; absent: the operator's local time zone.
    time_zone: Annotated[str, Field(min_length=1)] | None = None
    # Stops new RayJobs from being created; RayJobs already created are left alone.
    suspend: bool | None = None


class RayCronJobStatus(K8sModel):
    last_schedule_time: datetime | None = None


class RayCronJob(KubeObject):
    """A RayJob created from a template on a cron schedule."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [_NAME_FITS]})

    crd = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="RayCronJob",
        plural="raycronjobs",
        scope="Namespaced",
        categories=("all",),
        printer_columns=(
            PrinterColumn("schedule", "string", ".spec.schedule"),
            PrinterColumn("timezone", "string", ".spec.timeZone"),
            PrinterColumn("last schedule", "date", ".status.lastScheduleTime"),
            PrinterColumn("age", "date", ".metadata.creationTimestamp"),
            PrinterColumn("suspend", "boolean", ".spec.suspend"),
        ),
    )

    spec: RayCronJobSpec
    status: RayCronJobStatus | None = None
