"""Smoke test: the simulator runs a tiny scenario end to end and writes a sane report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rayquota.simulation.runner import main

SCENARIO = """
name: tiny
flavors: [{name: default}]
cohorts: [{name: pool}]
clusterQueues:
  - name: a
    cohort: pool
    preemption: {withinClusterQueue: LowerPriority}
    resourceGroups:
      - coveredResources: [cpu]
        flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
  - name: b
    cohort: pool
    resourceGroups:
      - coveredResources: [cpu]
        flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
workloadClasses:
  - {name: short, count: 20, interval: 0.5, runtime: 1, priority: 1, requests: {cpu: 1}}
  - {name: wide, queues: [a/default], count: 3, interval: 2, start: 1, runtime: 2, priority: 9, pods: 2,
     requests: {cpu: 2}}
"""


def test_simulator_writes_report_and_chart(tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "out"
    assert main(scenario, out) == 0
    report = json.loads((out / "report.json").read_text())
    png = (out / "report.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    assert report["workloads"] == 43 and report["admitted"] == 43 and report["never_admitted"] == 0
    # 2 queues x 20 short + 3 wide: 40 + 3 x 4 x 2 = 64 cpu-seconds on 8 cpus = 8 s of full capacity.
    assert report["capacity_bound_s"] == 8.0
    assert report["makespan_s"] >= report["capacity_bound_s"]
    assert report["makespan_s"] >= report["arrival_bound_s"]
    assert 0 < report["utilisation_mean"]["cpu"] <= 1
    for stats in report["classes"].values():
        wait = stats["wait_s"]
        assert 0 <= wait["p50"] <= wait["p90"] <= wait["p99"]
    assert set(report["queues"]) == {"a", "b"}
    assert report["classes"]["wide"]["wait_s"]["p99"] <= report["classes"]["short"]["wait_s"]["p99"]


def test_bad_scenario_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(
        "clusterQueues: [{name: a, resourceGroups: [{flavors: [{name: f, resources: "
        "[{name: cpu, nominalQuota: lots}]}]}]}]\n"
    )
    assert main(scenario, tmp_path / "out") == 2
    captured = capsys.readouterr()
    # The user is told which file, which queue and which value, and nothing is written.
    assert str(scenario) in captured.err
    assert "clusterQueue a" in captured.err and "invalid quantity 'lots'" in captured.err
    assert captured.out == ""
    assert not (tmp_path / "out").exists()


RACKS = """
name: racks
topologies: [{name: racks, levels: [topology.rayquota.io/rack, kubernetes.io/hostname]}]
nodes: [{name: gpu, count: 2, racks: 2, cpu: "8", memory: 64Gi, gpus: 4, labels: {pool: gpu}}]
flavors:
  - {name: gpu, nodeLabels: {pool: gpu}, topologyName: racks,
     tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]}
clusterQueues:
  - name: q
    resourceGroups:
      - coveredResources: [nvidia.com/gpu]
        flavors: [{name: gpu, resources: [{name: nvidia.com/gpu, nominalQuota: 100}]}]
workloadClasses:
  - {name: rack, count: 4, interval: 1, runtime: 10, pods: 2, requests: {nvidia.com/gpu: 4},
     topologyRequest: {required: topology.rayquota.io/rack}}
"""


def test_a_scenario_with_racks_reports_use_per_rack(tmp_path: Path) -> None:
    scenario = tmp_path / "racks.yaml"
    scenario.write_text(RACKS)
    out = tmp_path / "out"
    assert main(scenario, out) == 0
    report = json.loads((out / "report.json").read_text())
    # The quota would take all four at once; the racks (8 GPUs each) hold one job each.
    assert report["admitted"] == 4
    assert report["classes"]["rack"]["wait_s"]["p90"] == 8.0  # the 3rd and 4th wait for a rack to empty
    per_rack = report["domains"]["per_domain"]
    assert set(per_rack) == {"b0-r0", "b0-r1"}
    assert all(d["utilisation_peak"] == 1.0 for d in per_rack.values())
    assert (out / "report.png").stat().st_size > 0
