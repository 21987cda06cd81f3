"""History from a real Prometheus (Debian's ``prometheus``; ``make test`` installs it): it scrapes
the operator's queue gauges on loopback, served by the operator's own code (``metrics.
observe_queues`` on an engine, ``prometheus_client.start_http_server`` as ``rayquota run`` does),
and the dashboard reads them back with ``query_range``."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import textwrap
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from rayquota.dashboard.history import HistoryRing
from rayquota.dashboard.prometheus_history import PrometheusHistory
from rayquota.ports import free_port
from tests.polling import wait_for
from tests.prometheus_server import prometheus_scraping

# The operator's side: an engine with two queues, its gauges set by the operator's own code and
# served as the operator serves them. Each line on stdin admits one more workload in team-a.
EXPORTER = textwrap.dedent(
    """
    import sys
    from prometheus_client import start_http_server
    from rayquota.operator.queue.reporting import metrics
    from rayquota.queueing import (ClusterQueue, Engine, FlavorQuotas, LocalQueue, PodSet,
        ResourceFlavor, ResourceGroup, ResourceQuota, Workload)

    GPU = "nvidia.com/gpu"
    engine = Engine()
    engine.upsert_flavor(ResourceFlavor("a100"))
    for name, gpus in (("team-a", 8), ("team-b", 4)):
        group = (ResourceGroup((GPU,), (FlavorQuotas("a100", {GPU: ResourceQuota.of(gpus)}),)),)
        engine.upsert_cluster_queue(ClusterQueue(name, group))
        engine.upsert_local_queue(LocalQueue("ns", name, name))
    made = 0

    def submit(queue, gpus):
        global made
        made += 1
        pods = (PodSet("main", 1, {GPU: gpus * 1000}),)
        engine.add_workload(Workload("ns", f"w{made}", queue, pods, created=made))

    for _ in range(3):
        submit("team-a", 1)
    submit("team-b", 4)
    submit("team-b", 2)
    submit("team-b", 2)
    engine.run_cycle()
    metrics.observe_queues(engine)
    start_http_server(int(sys.argv[1]), addr="127.0.0.1")
    print("serving", flush=True)
    for _line in sys.stdin:
        submit("team-a", 1)
        engine.run_cycle()
        metrics.observe_queues(engine)
        print("admitted", flush=True)
    """
)


def get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read())


@pytest.fixture
def exporter() -> Iterator[tuple[int, subprocess.Popen[str]]]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", EXPORTER, str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "serving"
        yield port, process
    finally:
        process.kill()
        process.wait(10)


@pytest.fixture
def prometheus(tmp_path: Path, exporter: tuple[int, subprocess.Popen[str]]) -> Iterator[str]:
    scraped = (
        "Prometheus to scrape the operator's gauges",
        lambda url: _has(url, "rayquota_pending_workloads"),
    )
    with prometheus_scraping(f"127.0.0.1:{exporter[0]}", tmp_path, scraped) as url:
        yield url


def _has(url: str, metric: str) -> bool:
    try:
        answer = get_json(f"{url}/api/v1/query?query={urllib.parse.quote(metric)}")
    except OSError:
        return False
    return bool(isinstance(answer, dict) and answer["data"]["result"])


def latest(ring: HistoryRing, queue: str, what: str) -> float | None:
    [series] = [s for s in ring.view()["series"] if s["clusterQueue"] == queue]
    values = [v for v in series[what] if v is not None]
    return values[-1] if values else None


def test_history_is_read_from_prometheus_and_then_only_what_is_new(
    prometheus: str, exporter: tuple[int, subprocess.Popen[str]]
) -> None:
    ring = HistoryRing(interval_s=1.0, hours=0.05)  # 180 one-second steps
    source = PrometheusHistory(prometheus, ring)

    async def refresh() -> int:
        async with aiohttp.ClientSession() as session:
            return await source.refresh(session)

    first = asyncio.run(refresh())
    assert source.error is None
    assert first == ring.capacity == 180  # the whole window, gaps before the first scrape
    assert latest(ring, "team-a", "usage") == 3.0
    assert latest(ring, "team-b", "usage") == 4.0
    assert latest(ring, "team-b", "pending") == 2  # active and inadmissible summed
    assert latest(ring, "team-a", "pending") == 0
    [team_a] = [s for s in ring.view()["series"] if s["clusterQueue"] == "team-a"]
    assert team_a["usage"][0] is None  # before Prometheus started: a gap, not a zero

    process = exporter[1]
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("more\n")
    process.stdin.flush()
    assert process.stdout.readline().strip() == "admitted"
    added: list[int] = []

    def seen_four() -> bool:
        added.append(asyncio.run(refresh()))
        return latest(ring, "team-a", "usage") == 4.0

    wait_for("the fifth GPU of team-a in the history", seen_four, timeout_s=30, interval_s=0.5)
    assert source.error is None
    assert 0 < max(added) < 60  # only the steps since the last read, not the window again
    assert len(ring) == ring.capacity and not any(math.isnan(t) for t in ring.view()["times"])


def test_a_label_value_is_quoted_and_a_failing_prometheus_named_with_the_ring_kept(prometheus: str) -> None:
    ring = HistoryRing(resource='gpu"}) or vector(1', interval_s=1.0, hours=0.01)
    source = PrometheusHistory(prometheus, ring)

    async def refresh() -> int:
        async with aiohttp.ClientSession() as session:
            return await source.refresh(session)

    assert asyncio.run(refresh()) == ring.capacity  # the label value is quoted, not injected
    assert source.error is None
    series = ring.view()["series"]
    assert {s["clusterQueue"] for s in series} == {"team-a", "team-b"}  # the pending counts
    assert all(v is None for s in series for v in s["usage"])  # no resource of that name
    broken = PrometheusHistory(f"{prometheus}/nowhere", HistoryRing(interval_s=1.0, hours=0.01))

    async def refresh_broken() -> int:
        async with aiohttp.ClientSession() as session:
            return await broken.refresh(session)

    assert asyncio.run(refresh_broken()) == 0
    assert broken.error is not None and "/nowhere" in broken.error
    assert len(broken.ring) == 0
