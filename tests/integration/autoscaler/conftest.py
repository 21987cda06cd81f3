"""The autoscaler folder: rayquota's operator (own Ray reconcilers, queue on) on ``as-*``
namespaces, the queue folder's per-test quota and gate sampler, and a node agent per test that
runs real Ray (head, autoscaler, workers) for the pods kwok runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.autoscaler.node_agent import NodeAgent
from tests.integration.queue.conftest import Quota, running_operator
from tests.integration.queue.conftest import gate_sampler as gate_sampler  # the same fixture
from tests.integration.ray.kubehelpers import Kube

PREFIX = "as"


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


@pytest.fixture(scope="package")
def autoscaler_operator(crds_installed: None) -> Iterator[Path]:
    with running_operator(PREFIX) as dashboard_map:
        yield dashboard_map


@pytest.fixture
def kube(control_plane: Any, namespace: str) -> Kube:
    return Kube(control_plane, namespace)


@pytest.fixture
def quota(control_plane: Any, namespace: str) -> Iterator[Quota]:
    q = Quota(control_plane, namespace)
    try:
        yield q
    finally:
        q.delete_all()


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
