"""A RayCronJob's schedule: KubeRay's syntax (robfig/cron's standard parser), read with croniter.

Accepted, as KubeRay accepts them: five fields (minute hour day-of-month month day-of-week, with
names, ranges, steps and `?`), the descriptors `@yearly @annually @monthly @weekly @daily
@midnight @hourly`, and `@every <Go duration>` (croniter has no `@every`, so that one is read
here: a fixed interval from the previous run, whole seconds, at least one second).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

EVERY = "@every "
DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
CRON_FIELDS = 5

# Go's time.ParseDuration: a sequence of decimal numbers, each with a unit.
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_GO_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


class ScheduleError(ValueError):
    pass


def go_duration_seconds(text: str) -> float:
    """Seconds in a Go duration string ("90s", "1h30m", "1.5h"); ScheduleError if it is not one."""
    sign, body = (-1.0, text[1:]) if text.startswith("-") else (1.0, text.removeprefix("+"))
    if body == "0":
        return 0.0
    total, position = 0.0, 0
    for part in _GO_DURATION_PART.finditer(body):
        if part.start() != position:
            break
        total += float(part.group(1)) * _GO_UNIT_SECONDS[part.group(2)]
        position = part.end()
    if not body or position != len(body):
        raise ScheduleError(f"time: invalid duration {text!r}")
    return sign * total


def time_zone(name: str | None, env: Mapping[str, str] | None = None) -> dt.tzinfo:
    """The zone `spec.timeZone` names, or (None) the operator's local zone as Go reads it: $TZ,
    empty meaning UTC, else /etc/localtime, else UTC. `env`: the process environment, which the
    entry point passes (None: /etc/localtime)."""
    if name is not None:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ScheduleError(f"unknown time zone {name!r}") from exc
    env = env or {}
    if "TZ" in env:
        local = env["TZ"].removeprefix(":")
        if not local:
            return dt.UTC
        try:
            return ZoneInfo(local)
        except (ZoneInfoNotFoundError, ValueError):
            return dt.UTC
    try:
        with open("/etc/localtime", "rb") as localtime:
            return ZoneInfo.from_file(localtime, key="localtime")
    except (OSError, ValueError):
        return dt.UTC


@dataclass(frozen=True)
class Schedule:
    expression: str
    zone: dt.tzinfo
    # `@every`: the fixed interval in whole seconds; None for a calendar expression.
    interval_s: int | None = None

    @classmethod
    def parse(cls, expression: str, zone: dt.tzinfo) -> Schedule:
        text = expression.strip()
        if text.startswith(EVERY):
            seconds = go_duration_seconds(text[len(EVERY) :].strip())
            return cls(text, zone, interval_s=max(1, int(seconds)))
        if text.startswith("@"):
            if text not in DESCRIPTORS:
                raise ScheduleError(f"unrecognized descriptor: {text}")
        elif len(text.split()) != CRON_FIELDS:
            raise ScheduleError(f"expected exactly {CRON_FIELDS} fields, found {len(text.split())}: {text}")
        try:
            croniter(text, dt.datetime(2000, 1, 1, tzinfo=zone))
        except (CroniterError, ValueError, KeyError) as exc:
            raise ScheduleError(f"{exc}") from exc
        return cls(text, zone)

    def next_after(self, moment: dt.datetime) -> dt.datetime:
        """The first run strictly after `moment` (aware), in UTC."""
        whole = moment.replace(microsecond=0)
        if self.interval_s is not None:
            return (whole + dt.timedelta(seconds=self.interval_s)).astimezone(dt.UTC)
        runs = croniter(self.expression, whole.astimezone(self.zone))
        following: dt.datetime = runs.get_next(dt.datetime)
        return following.astimezone(dt.UTC)
