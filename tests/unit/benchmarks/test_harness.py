"""The pure parsing helpers of benchmarks/harness.py (the rest of it needs a cluster)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import harness
from tests.polling import wait_for


def _sample(code: str, group: str, resource: str, scope: str, sub: str, verb: str, value: int) -> str:
    labels = (
        f'code="{code}",component="apiserver",dry_run="",group="{group}",resource="{resource}",'
        f'scope="{scope}",subresource="{sub}",verb="{verb}",version="v1"'
    )
    return f"apiserver_request_total{{{labels}}} {value}"


METRICS = "\n".join(
    [
        "# HELP apiserver_request_total [STABLE] Counter of apiserver requests.",
        "# TYPE apiserver_request_total counter",
        _sample("200", "ray.io", "rayclusters", "cluster", "", "LIST", 3),
        _sample("200", "ray.io", "rayclusters", "namespace", "", "LIST", 2),
        _sample("201", "", "pods", "resource", "", "POST", 7),
        _sample("409", "", "pods", "resource", "", "POST", 1),
        _sample("200", "ray.io", "rayclusters", "resource", "status", "PUT", 4),
        'apiserver_request_total_other{verb="GET",resource="pods"} 99',
        'apiserver_request_duration_seconds_count{verb="GET",resource="pods"} 50',
    ]
)


def test_request_counts_sums_codes_and_scopes_and_keeps_subresources_apart() -> None:
    counts = harness.request_counts(METRICS)
    assert counts == {
        ("LIST", "rayclusters"): 5,
        ("POST", "pods"): 8,
        ("PUT", "rayclusters/status"): 4,
    }
    assert harness.writes(counts) == 12
    assert harness.total(counts) == 17
    assert harness.by_verb(counts)["LIST"] == 5


def test_parse_samples_reads_escaped_label_values() -> None:
    text = 'm{a="x\\"y",b=""} 1.5\nm 2\n'
    assert list(harness.parse_samples(text, "m")) == [({"a": 'x\\"y', "b": ""}, 1.5), ({}, 2.0)]


def _audit(stage: str, verb: str, agent: str, when: str, resource: str = "pods", sub: str = "") -> str:
    ref = {"resource": resource, "namespace": "ns"} | ({"subresource": sub} if sub else {})
    return json.dumps(
        {
            "kind": "Event",
            "stage": stage,
            "verb": verb,
            "userAgent": agent,
            "objectRef": ref,
            "requestReceivedTimestamp": when,
        }
    )


def test_audit_counts_each_request_once_per_client_and_honours_since() -> None:
    kuberay = "kuberay-operator/v1.6.2 (linux/amd64) kubernetes/$Format"
    lines = [
        _audit("ResponseStarted", "watch", kuberay, "2026-11-22T06:00:00.000000Z"),
        _audit("ResponseComplete", "watch", kuberay, "2026-11-22T06:00:00.000000Z"),  # same watch
        _audit("ResponseComplete", "create", kuberay, "2026-11-22T06:00:01.000000Z"),
        _audit("ResponseComplete", "update", kuberay, "2026-11-22T06:00:02.000000Z", "rayclusters", "status"),
        _audit("ResponseComplete", "list", "kwok/v0.7.0", "2026-11-22T06:00:03.500000Z"),
        "",
    ]
    counts = harness.audit_request_counts(lines)
    assert counts["kuberay-operator"] == {
        ("WATCH", "pods"): 1,
        ("POST", "pods"): 1,
        ("PUT", "rayclusters/status"): 1,
    }
    assert counts["kwok"] == {("LIST", "pods"): 1}

    since = harness._epoch("2026-11-22T06:00:01.500000Z")
    later = harness.audit_request_counts(lines, since=since)
    assert later["kuberay-operator"] == {("PUT", "rayclusters/status"): 1}
    assert harness.writes(later["kuberay-operator"]) == 1

    window = harness.audit_request_counts(lines, since=harness._epoch("2026-11-22T06:00:01Z"), until=since)
    assert window == {"kuberay-operator": {("POST", "pods"): 1}}
    assert harness.merged(counts, exclude=["kwok"]) == counts["kuberay-operator"]


def test_audit_names_a_non_resource_request_by_its_path() -> None:
    line = json.dumps(
        {
            "stage": "ResponseComplete",
            "verb": "get",
            "userAgent": "kubectl/v1.34.4",
            "requestURI": "/api?timeout=32s",
        }
    )
    assert harness.audit_request_counts([line]) == {"kubectl": {("GET", "/api"): 1}}


def test_tally_events_counts_repeats_and_sources_tell_whose() -> None:
    events = [
        {"type": "Normal", "count": 3, "source": {"component": "kuberay-operator"}},
        {"type": "Warning", "source": {"component": "kuberay-operator"}},
        {"type": "Normal", "reportingComponent": "rayquota", "series": {"count": 5}},
        {"type": "Normal", "source": {"component": "default-scheduler"}},
    ]
    assert harness.tally_events(events) == harness.EventTally(objects=4, occurrences=10, warnings=1)
    kuberay = [e for e in events if harness.event_source(e) == "kuberay-operator"]
    assert harness.tally_events(kuberay) == harness.EventTally(2, 4, 1)
    assert harness.event_sources(events) == {"kuberay-operator": 2, "rayquota": 1, "default-scheduler": 1}


def test_ratio_handles_a_zero_denominator() -> None:
    assert harness.ratio(3, 2) == "1.50"
    assert harness.ratio(0, 0) == "1.00"
    assert harness.ratio(1, 0) == "n/a"


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 11)]
    assert harness.percentile(values, 50) == 5.0
    assert harness.percentile(values, 90) == 9.0
    assert harness.percentile(values, 99) == 10.0
    assert harness.percentile([3.0], 90) == 3.0


def test_audit_counts_include_the_rotated_files(tmp_path: Path) -> None:
    agent = "rayquota/0.1"
    log = tmp_path / "audit.log"
    (tmp_path / "audit-2026-11-26T10-00-00.000.log").write_text(
        _audit("ResponseComplete", "create", agent, "2026-11-26T09:59:00.000000Z") + "\n"
    )
    (tmp_path / "audit-2026-11-26T11-00-00.000.log").write_text(
        _audit("ResponseComplete", "create", agent, "2026-11-26T10:59:00.000000Z") + "\n"
    )
    log.write_text(_audit("ResponseComplete", "update", agent, "2026-11-26T11:30:00.000000Z") + "\n")
    assert [p.name for p in harness.audit_files(log)] == [
        "audit-2026-11-26T10-00-00.000.log",
        "audit-2026-11-26T11-00-00.000.log",
        "audit.log",
    ]
    counts = harness.read_audit_counts(log)["rayquota"]
    assert counts[("POST", "pods")] == 2 and counts[("PUT", "pods")] == 1


# A benchmark stand-in: its `finally` block stands for stopping its local cluster.
_SIGNALLED_BENCHMARK = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from benchmarks import harness
harness.stop_on_signals()
marker = Path({marker!r})
try:
    marker.write_text("running")
    while True:
        time.sleep(0.05)
finally:
    marker.write_text("cleaned up")
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_benchmark_runs_its_cleanup(tmp_path: Path, signum: signal.Signals) -> None:
    marker = tmp_path / "marker"
    repo = str(Path(harness.__file__).resolve().parents[1])
    code = _SIGNALLED_BENCHMARK.format(repo=repo, marker=str(marker))
    # Started as `cmd &` starts it: SIGINT ignored when Python starts.
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        wait_for("the benchmark to start", lambda: marker.exists(), timeout_s=30, interval_s=0.02)
        proc.send_signal(signum)
        assert proc.wait(timeout=30) == 128 + signum
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert marker.read_text() == "cleaned up"
