from __future__ import annotations

import re

from rayquota.operator.queue import naming
from tests.config_env import queue_settings_from_env

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def test_workload_name_is_kind_name_and_uid_hash_in_lower_case() -> None:
    name = naming.workload_name("RayJob", "Train-GPT", "0b6f-uid")
    assert name.startswith("rayjob-train-gpt-")
    assert len(name.rsplit("-", 1)[1]) == 5
    assert name == naming.workload_name("RayJob", "Train-GPT", "0b6f-uid")


def test_recreated_object_gets_a_new_workload_name() -> None:
    assert naming.workload_name("RayJob", "a", "uid-1") != naming.workload_name("RayJob", "a", "uid-2")


def test_long_names_are_cut_to_a_valid_object_name_keeping_the_hash() -> None:
    name = naming.workload_name("RayService", "x" * 300, "u")
    assert len(name) <= naming.MAX_NAME and DNS_SUBDOMAIN.match(name)
    assert name.endswith(naming.short_hash("u"))


def test_dns_label_keeps_valid_names_and_disambiguates_altered_ones() -> None:
    assert naming.dns_label("gpu-workers") == "gpu-workers"
    a, b = naming.dns_label("GPU_workers"), naming.dns_label("gpu.workers")
    assert a != b and a.startswith("gpu-workers-") and re.match(r"^[a-z0-9-]+$", a)
    assert len(naming.dns_label("g" * 100)) <= 63


def test_queue_label_either_key_and_default_queue_only_when_managed() -> None:
    settings = naming.QueueSettings()
    kueue = {"metadata": {"namespace": "ns", "labels": {naming.KUEUE_QUEUE_LABEL: "team-a"}}}
    ours = {"metadata": {"namespace": "ns", "labels": {naming.QUEUE_LABEL: "team-b"}}}
    bare = {"metadata": {"namespace": "ns", "labels": {}}}
    assert naming.queue_name_of(kueue, settings) == "team-a"
    assert naming.queue_name_of(ours, settings) == "team-b"
    since = {"ns": "2026-11-22T09:00:00Z"}
    assert naming.queue_name_of(bare, settings, since) is None
    managed = naming.QueueSettings(manage_jobs_without_queue_name=True)
    assert naming.queue_name_of(bare, managed, since) == "default"  # being created: no timestamp yet
    assert naming.queue_name_of(bare, managed, {"other": "2026-11-22T09:00:00Z"}) is None


def test_default_queue_takes_only_objects_created_since_it_exists() -> None:
    """A running unlabelled object must not be queued (and suspended) by its next update."""
    managed = naming.QueueSettings(manage_jobs_without_queue_name=True)
    since = {"ns": "2026-11-22T09:00:00Z"}

    def created_at(timestamp: str) -> dict[str, object]:
        return {"metadata": {"namespace": "ns", "labels": {}, "creationTimestamp": timestamp}}

    assert naming.queue_name_of(created_at("2026-11-22T08:59:59Z"), managed, since) is None
    assert naming.queue_name_of(created_at("2026-11-22T09:00:00Z"), managed, since) == "default"
    assert naming.queue_name_of(created_at("2026-11-22T10:00:00Z"), managed, since) == "default"


def test_settings_from_env_select_label_keys() -> None:
    settings = queue_settings_from_env({"RAYQUOTA_QUEUE_LABELS": "a/q, b/q"})
    assert tuple(settings.queue_label_keys) == ("a/q", "b/q")
    obj = {"metadata": {"labels": {naming.KUEUE_QUEUE_LABEL: "x", "b/q": "y"}}}
    assert naming.queue_name_of(obj, settings) == "y"
