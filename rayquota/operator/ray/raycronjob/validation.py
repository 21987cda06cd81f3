"""KubeRay's RayCronJob rules: the name leaves room for the child's suffix, the schedule and the
time zone parse, and the job template is a valid RayJob spec (the RayJob rules, field paths
under spec.jobTemplate)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from rayquota.api.raycronjob_v1 import MAX_RAYCRONJOB_NAME
from rayquota.operator.ray.raycronjob.schedule import Schedule, ScheduleError, time_zone
from rayquota.operator.ray.rayjob.validation import validate_rayjob

# Any name: the child's length is guaranteed by the cron's own limit, checked here.
_TEMPLATE_PROBE_NAME = "raycronjob-template"


def schedule_of(cron: Mapping[str, Any], local_zone: dt.tzinfo | None = None) -> Schedule:
    """The parsed schedule in its zone (`local_zone` stands for the operator's when the spec names
    none); ScheduleError names what is wrong."""
    spec = cron.get("spec") or {}
    name = spec.get("timeZone")
    zone = time_zone(name) if name is not None or local_zone is None else local_zone
    return Schedule.parse(str(spec.get("schedule") or ""), zone)


def validate_raycronjob(cron: Mapping[str, Any]) -> list[str]:
    errors: list[str] = []
    name = str(cron["metadata"]["name"])
    spec = cron.get("spec") or {}
    if len(name) > MAX_RAYCRONJOB_NAME:
        errors.append(
            f"metadata.name {name!r} has {len(name)} characters; a RayCronJob's name may have at most "
            f"{MAX_RAYCRONJOB_NAME} (its RayJobs are named <name>-<minutes since the epoch>)"
        )
    schedule = str(spec.get("schedule") or "")
    if "TZ" in schedule:
        errors.append(f"spec.schedule {schedule!r}: cannot use TZ or CRON_TZ in schedule, use spec.timeZone")
    else:
        try:
            Schedule.parse(schedule, dt.UTC)
        except ScheduleError as exc:
            errors.append(f"spec.schedule {schedule!r} is not a valid cron schedule: {exc}")
    if "timeZone" in spec:
        zone = spec["timeZone"]
        if not zone:
            errors.append("spec.timeZone must not be empty: omit it to use the operator's local time zone")
        else:
            try:
                time_zone(str(zone))
            except ScheduleError:
                errors.append(f"spec.timeZone {zone!r} is not a time zone of the IANA database")
    template = spec.get("jobTemplate")
    if not isinstance(template, Mapping):
        errors.append("spec.jobTemplate is required")
    else:
        probe = {"metadata": {"name": _TEMPLATE_PROBE_NAME}, "spec": template}
        errors += [message.replace("spec.", "spec.jobTemplate.") for message in validate_rayjob(probe)]
    return errors
