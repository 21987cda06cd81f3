"""The autoscaler folder: rayquota's operator (own Ray reconcilers, queue on) on ``as-*``
namespaces (the queue folder's ``running_operator``), the queue folder's ``kube``, ``quota`` and
``gate_sampler`` fixtures, and a node agent per test that runs real Ray (head, autoscaler, workers) for the
pods kwok runs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.autoscaler.clusters import DRIVER, Driver
from tests.integration.autoscaler.node_agent import NodeAgent

# The queue folder's fixtures themselves, not copies.
from tests.integration.queue.conftest import gate_sampler as gate_sampler
from tests.integration.queue.conftest import kube as kube
from tests.integration.queue.conftest import quota as quota
from tests.integration.queue.conftest import running_operator

PREFIX = "as"


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


@pytest.fixture(scope="package")
def autoscaler_operator(crds_installed: None) -> Iterator[Path]:
    with running_operator(PREFIX) as dashboard_map:
        yield dashboard_map


@pytest.fixture
def node_agent(control_plane: Any, namespace: str) -> Iterator[Callable[..., NodeAgent]]:
    """``node_agent(cluster, loopback_pod_ips=False)`` starts an agent for RayCluster ``cluster``
    (see NodeAgent.loopback_pod_ips); stopped (every Ray process it started gone) after the test."""
    agents: list[NodeAgent] = []

    def start(cluster: str, loopback_pod_ips: bool = False) -> NodeAgent:
        agent = NodeAgent(
            Path(control_plane.kubeconfig), namespace, cluster, loopback_pod_ips=loopback_pod_ips
        ).start()
        agents.append(agent)
        return agent

    try:
        yield start
    finally:
        for agent in agents:
            agent.stop()


@pytest.fixture
def drivers(tmp_path: Path) -> Iterator[Callable[[NodeAgent], Driver]]:
    """``drivers(agent)`` starts the driver on the agent's head; each is ended after the test."""
    started: list[Driver] = []

    def start(agent: NodeAgent) -> Driver:
        assert agent.head is not None
        address = f"127.0.0.1:{agent.head.gcs_port}"
        output = tmp_path / f"driver-{len(started)}.log"
        with output.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-c", DRIVER, address], stdout=out, stderr=subprocess.STDOUT
            )
        started.append(Driver(process, output))
        return started[-1]

    try:
        yield start
    finally:
        for driver in started:
            if driver.process.poll() is None:
                driver.process.kill()
                driver.process.wait(timeout=30)
