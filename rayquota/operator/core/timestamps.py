"""Kubernetes timestamps (RFC 3339, UTC, "Z"): parsed and written in one place."""

from __future__ import annotations

import datetime as dt


def parse_rfc3339(value: object) -> dt.datetime | None:
    """An API timestamp ("2026-01-02T03:04:05Z", fractions and offsets accepted) as an aware
    datetime; None for an empty value. A datetime passes through (aware: naive ones are UTC)."""
    if not value:
        return None
    if isinstance(value, dt.datetime):
        moment = value
    else:
        moment = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def format_rfc3339(moment: dt.datetime) -> str:
    """Whole seconds in UTC, as the API writes metav1.Time."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_rfc3339() -> str:
    return format_rfc3339(dt.datetime.now(dt.UTC))
