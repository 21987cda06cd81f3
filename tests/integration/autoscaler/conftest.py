"""The autoscaler folder: rayquota's operator (own Ray reconcilers, queue on) on ``as-*``
namespaces (the queue folder's ``running_operator``), the queue folder's ``kube``, ``quota`` and
``gate_sampler`` fixtures, and a node agent per test that runs real Ray (head, autoscaler, workers) for the
pods kwok runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

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
def node_agent(control_plane: Any, namespace: str) -> Iterator[Callable[[str], NodeAgent]]:
    """``node_agent(cluster)`` starts an agent for RayCluster ``cluster``; stopped (every Ray
    process it started gone) after the test."""
    agents: list[NodeAgent] = []

    def start(cluster: str) -> NodeAgent:
        agent = NodeAgent(Path(control_plane.kubeconfig), namespace, cluster).start()
        agents.append(agent)
        return agent

    try:
        yield start
    finally:
        for agent in agents:
            agent.stop()
