"""RayCronJob: the schedule, KubeRay's validation rules, and the pure plan on a given clock."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from rayquota.api.ray_unimplemented import unimplemented_fields
from rayquota.operator.ray.raycronjob.plan import (
    CRONJOB_NAME_LABEL,
    MISSED_RUNS_COUNTED,
    SCHEDULED_TIMESTAMP_ANNOTATION,
    Create,
    Invalid,
    Suspended,
    Wait,
    plan,
    rayjob_name,
)
from rayquota.operator.ray.raycronjob.schedule import Schedule, ScheduleError, go_duration_seconds, time_zone
from rayquota.operator.ray.raycronjob.status import status_after
from rayquota.operator.ray.raycronjob.validation import validate_raycronjob

UTC = dt.UTC
QUEUE_KEYS = ("rayquota.io/queue-name", "kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class")


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


TEMPLATE: dict[str, Any] = {
    "entrypoint": "python -c 'print(1)'",
    "shutdownAfterJobFinishes": True,
    "rayClusterSpec": {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.41.0"}]}},
        }
    },
}


def cronjob(
    schedule: str = "* * * * *",
    *,
    created: str = "2026-01-01T12:00:30",
    last: str | None = None,
    name: str = "nightly",
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCronJob",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": "uid-1",
            "creationTimestamp": f"{created}Z",
            "labels": labels or {},
        },
        "spec": {"schedule": schedule, "jobTemplate": copy.deepcopy(TEMPLATE), **spec},
    }
    if last is not None:
        obj["status"] = {"lastScheduleTime": f"{last}Z"}
    return obj


def step(obj: dict[str, Any], now: str, zone: dt.tzinfo = UTC) -> Any:
    return plan(obj, at(now), local_zone=zone, inherited_label_keys=QUEUE_KEYS)


# --- the schedule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("* * * * *", "2026-01-01T12:00:00", "2026-01-01T12:01:00"),
        ("* * * * *", "2026-01-01T12:00:59.999", "2026-01-01T12:01:00"),
        ("*/15 * * * *", "2026-01-01T12:01:00", "2026-01-01T12:15:00"),
        ("0 0 * * MON-FRI", "2026-01-02T01:00:00", "2026-01-05T00:00:00"),  # Friday -> Monday
        ("@hourly", "2026-01-01T12:00:00", "2026-01-01T13:00:00"),
        ("@every 1h30m", "2026-01-01T12:00:00.5", "2026-01-01T13:30:00"),
        ("@every 500ms", "2026-01-01T12:00:00", "2026-01-01T12:00:01"),  # at least a second
    ],
)
def test_next_run_is_strictly_after(expression: str, after: str, expected: str) -> None:
    assert Schedule.parse(expression, UTC).next_after(at(after)) == at(expected)


def test_a_time_zone_moves_the_calendar() -> None:
    taipei = Schedule.parse("45 21 * * *", ZoneInfo("Asia/Taipei"))  # UTC+8
    assert taipei.next_after(at("2026-01-01T12:00:00")) == at("2026-01-01T13:45:00")


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("* * * * * *", "expected exactly 5 fields, found 6"),
        ("61 * * * *", "out of range"),
        ("@fortnightly", "unrecognized descriptor"),
        ("@every soon", "invalid duration"),
        ("", "expected exactly 5 fields, found 0"),
    ],
)
def test_bad_schedules_say_why(expression: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        Schedule.parse(expression, UTC)


def test_go_durations() -> None:
    assert go_duration_seconds("1h30m") == 5400
    assert go_duration_seconds("1.5h") == 5400
    assert go_duration_seconds("90s") == 90
    for bad in ("", "1", "1d", "h1", "1h 30m"):
        with pytest.raises(ScheduleError):
            go_duration_seconds(bad)


def test_the_local_zone_follows_tz_as_go_does() -> None:
    assert time_zone(None, {"TZ": "Asia/Taipei"}) == ZoneInfo("Asia/Taipei")
    assert time_zone(None, {"TZ": ""}) is UTC
    with pytest.raises(ScheduleError, match="Mars/Olympus"):
        time_zone("Mars/Olympus")


# --- validation -----------------------------------------------------------------------------------


def test_a_valid_cronjob_has_no_errors() -> None:
    assert validate_raycronjob(cronjob(timeZone="Asia/Taipei")) == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": "n" * 37}, "metadata.name 'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn' has 37 characters"),
        ({"schedule": "CRON_TZ=UTC * * * * *"}, "cannot use TZ or CRON_TZ"),
        ({"schedule": "every minute"}, "spec.schedule 'every minute' is not a valid cron schedule"),
        ({"timeZone": ""}, "spec.timeZone must not be empty"),
        ({"timeZone": "Mars/Olympus"}, "spec.timeZone 'Mars/Olympus' is not a time zone"),
    ],
)
def test_kuberays_rules_name_the_field(changes: dict[str, Any], message: str) -> None:
    name = changes.pop("name", "nightly")
    schedule = changes.pop("schedule", "* * * * *")
    errors = validate_raycronjob(cronjob(schedule, name=name, **changes))
    assert any(message in error for error in errors), errors


def test_the_template_is_checked_as_a_rayjob_under_spec_jobtemplate() -> None:
    obj = cronjob()
    del obj["spec"]["jobTemplate"]["rayClusterSpec"]
    obj["spec"]["jobTemplate"]["submissionMode"] = "Teleport"
    errors = validate_raycronjob(obj)
    assert "spec.jobTemplate.submissionMode 'Teleport' is not one of" in " ".join(errors)
    assert "one of spec.jobTemplate.rayClusterSpec or spec.jobTemplate.clusterSelector must be set" in errors


def test_the_longest_name_still_leaves_a_valid_rayjob_name() -> None:
    name = "n" * 36
    assert validate_raycronjob(cronjob(name=name)) == []
    # Ten digits of minutes (until the year 21014) plus a dash: 47, a RayJob's limit.
    assert len(rayjob_name(name, at("9999-12-31T23:59:00"))) <= 47


# --- the plan -------------------------------------------------------------------------------------


def test_before_the_first_run_it_waits_for_it() -> None:
    assert step(cronjob(), "2026-01-01T12:00:59") == Wait(at("2026-01-01T12:01:00"))


def test_the_first_run_creates_an_owned_rayjob_named_as_kuberay_names_it() -> None:
    obj = cronjob(labels={"rayquota.io/queue-name": "team-a", "argocd.argoproj.io/instance": "apps"})
    created = step(obj, "2026-01-01T12:01:00")
    assert isinstance(created, Create)
    assert created.scheduled_at == at("2026-01-01T12:01:00")
    assert created.next_run == at("2026-01-01T12:02:00")
    assert created.also_due == 0
    rayjob = created.rayjob
    minutes = int(at("2026-01-01T12:01:00").timestamp()) // 60
    assert rayjob["metadata"]["name"] == f"nightly-{minutes}" == "nightly-29454481"  # 1767268860 s / 60
    assert rayjob["metadata"]["namespace"] == "team-a"
    # Its queue label is inherited (so it is queued on its own); unrelated labels are not.
    assert rayjob["metadata"]["labels"] == {CRONJOB_NAME_LABEL: "nightly", "rayquota.io/queue-name": "team-a"}
    assert rayjob["metadata"]["annotations"] == {SCHEDULED_TIMESTAMP_ANNOTATION: "2026-01-01T12:01:00Z"}
    assert rayjob["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCronJob",
            "name": "nightly",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert rayjob["spec"] == TEMPLATE
    rayjob["spec"]["entrypoint"] = "changed"
    assert obj["spec"]["jobTemplate"]["entrypoint"] == TEMPLATE["entrypoint"]  # a copy


def test_kueues_priority_label_is_inherited_too() -> None:
    labels = {"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/priority-class": "high"}
    created = step(cronjob(labels=labels), "2026-01-01T12:01:00")
    assert isinstance(created, Create)
    assert created.rayjob["metadata"]["labels"] == {CRONJOB_NAME_LABEL: "nightly", **labels}


def test_after_a_run_the_next_is_counted_from_the_last_schedule_time() -> None:
    obj = cronjob(last="2026-01-01T12:01:00")
    assert step(obj, "2026-01-01T12:01:30") == Wait(at("2026-01-01T12:02:00"))
    created = step(obj, "2026-01-01T12:02:00.2")
    assert isinstance(created, Create) and created.scheduled_at == at("2026-01-01T12:02:00")


def test_missed_runs_are_created_one_by_one_oldest_first_and_counted() -> None:
    obj = cronjob()
    created = step(obj, "2026-01-01T12:05:10")
    assert isinstance(created, Create)
    assert (created.scheduled_at, created.also_due) == (at("2026-01-01T12:01:00"), 4)
    obj["status"] = status_after(obj, created.scheduled_at)
    again = step(obj, "2026-01-01T12:05:10")
    assert isinstance(again, Create)
    assert (again.scheduled_at, again.also_due) == (at("2026-01-01T12:02:00"), 3)


def test_the_missed_count_stops_at_its_cap() -> None:
    created = step(cronjob(), "2026-01-03T00:00:00")
    assert isinstance(created, Create) and created.also_due == MISSED_RUNS_COUNTED


def test_suspended_creates_nothing_even_when_due() -> None:
    assert step(cronjob(suspend=True), "2026-01-01T12:30:00") == Suspended()
    assert isinstance(step(cronjob(suspend=False), "2026-01-01T12:30:00"), Create)


def test_an_invalid_cronjob_creates_nothing_and_says_why() -> None:
    invalid = step(cronjob("@daily TZ=UTC"), "2026-01-02T00:00:00")
    assert isinstance(invalid, Invalid) and "cannot use TZ" in invalid.errors[0]


def test_without_a_time_zone_the_operators_zone_counts() -> None:
    obj = cronjob("0 9 * * *", created="2026-01-01T00:00:00")
    assert step(obj, "2026-01-01T00:00:01", ZoneInfo("Asia/Taipei")) == Wait(at("2026-01-01T01:00:00"))
    assert step(obj, "2026-01-01T00:00:01") == Wait(at("2026-01-01T09:00:00"))
    # An explicit timeZone wins over the operator's.
    obj["spec"]["timeZone"] = "UTC"
    assert step(obj, "2026-01-01T00:00:01", ZoneInfo("Asia/Taipei")) == Wait(at("2026-01-01T09:00:00"))


def test_the_status_records_the_run_in_whole_seconds_utc() -> None:
    obj = cronjob()
    obj["status"] = {"lastScheduleTime": "2026-01-01T12:01:00Z", "other": "kept"}
    assert status_after(obj, at("2026-01-01T12:02:00")) == {
        "lastScheduleTime": "2026-01-01T12:02:00Z",
        "other": "kept",
    }


def test_a_template_field_its_rayjobs_ignore_is_warned_on_the_raycronjob_by_its_path() -> None:
    template = copy.deepcopy(TEMPLATE)
    template["rayClusterSpec"]["headGroupSpec"]["ingressOptions"] = {"host": "h"}
    obj = cronjob(jobTemplate=template)
    assert unimplemented_fields(obj) == ["spec.jobTemplate.rayClusterSpec.headGroupSpec.ingressOptions"]
    created = step(obj, "2026-01-01T12:01:00")
    assert isinstance(created, Create)
    assert unimplemented_fields(created.rayjob) == ["spec.rayClusterSpec.headGroupSpec.ingressOptions"]
    assert unimplemented_fields(cronjob()) == []
