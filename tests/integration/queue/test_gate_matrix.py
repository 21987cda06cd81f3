"""The gate matrix (issue 17): kind (the Ray kinds, batch/v1 Jobs, JobSets) x created
suspended or not x webhooks on or off x transitions, every cell sampled throughout by
tests/gate_sampler.py (placement of every pod, GPUs of live pods within the admission and the
ClusterQueue, no child, submitter, unsuspended Job of a JobSet or pod of one before admission,
quota released only after the pods are gone).

Cells run concurrently, one namespace each, on two shared operators: the session's (no
webhooks) and this module's (webhooks served on 127.0.0.1, as `make run` serves them). Not
every combination is its own cell: each transition and each submission mode runs with both
webhook settings and both ways of creating the object.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.queue.conftest import running_operator
from tests.integration.queue.gate_cells import (
    RAYJOB_MODES,
    Cell,
    Env,
    Operator,
    close_env,
    new_env,
    run_cells,
)
from tests.integration.queue.gate_rayservice_cells import scenario_of
from tests.integration.ray import rayservice_support
from tests.integration.ray.kubehelpers import wait_for
from tests.integration.ray.rayhead import RayHead

pytestmark = [pytest.mark.ray]

second_ray_head = rayservice_support.second_ray_head
__all__ = ["second_ray_head"]

WEBHOOK_PREFIX = "qg"  # this module's operator; the session's watches q-*


def cells_for(kind: str, plan: list[tuple[bool, bool, tuple[str, ...]]]) -> list[Cell]:
    """(suspended, webhooks, transitions) per cell of one kind."""
    return [Cell(kind, suspended, webhooks, transitions) for suspended, webhooks, transitions in plan]


# Each submission mode: created both ways, with and without webhooks, through both transitions.
RAYJOB_CELLS = [
    cell
    for i, mode in enumerate(RAYJOB_MODES)
    for cell in cells_for(
        f"RayJob/{mode}",
        [
            (i % 2 == 0, False, ("suspend-resume",) if i < 2 else ("preemption",)),
            (i % 2 == 1, True, ("preemption",) if i < 2 else ("suspend-resume",)),
        ],
    )
]
RAYCLUSTER_CELLS = cells_for(
    "RayCluster",
    [
        (False, False, ("scale-up", "suspend-resume")),
        (True, False, ("preemption",)),
        (True, True, ("scale-up", "preemption")),
        (False, True, ("suspend-resume",)),
    ],
)
NEW_CLUSTER_CELLS = cells_for(
    "RayService/NewCluster",
    [
        (False, False, ("upgrade-before", "rollback")),
        (True, False, ("upgrade-after",)),
        (False, True, ("upgrade-after", "rollback")),
        (True, True, ("upgrade-before",)),
    ],
)
# A batch/v1 Job created unsuspended without the webhook is not a cell: the Job controller may
# start its pods before the queue suspends it (docs/operations.md; test_job_kind.py checks what
# holds there).
JOB_CELLS = cells_for(
    "Job",
    [
        (True, False, ("suspend-resume", "preemption")),
        (False, True, ("preemption", "suspend-resume")),
    ],
)
# A JobSet: all four ways. Written unsuspended without the webhook, what JobSet's controller
# starts before the queue suspends the JobSet is left out of the judging, and checked apart
# (gate_jobset_cells.py); everything after is judged as in every other cell.
JOBSET_CELLS = cells_for(
    "JobSet",
    [
        (True, False, ("suspend-resume", "preemption")),
        (False, True, ("preemption", "suspend-resume")),
        (True, True, ("preemption",)),
        (False, False, ("suspend-resume",)),
    ],
)
INCREMENTAL_CELLS = cells_for(
    "RayService/Incremental",
    [
        (False, False, ("incremental-step",)),
        (True, True, ("rollback", "incremental-step")),
    ],
)


@pytest.fixture(scope="module")
def webhook_operator(control_plane: Any, crds_installed: None) -> Iterator[Path]:
    with running_operator(WEBHOOK_PREFIX, webhooks=True) as dashboard_map:
        wait_for(
            "the webhook configurations",
            lambda: (
                control_plane.kubectl(
                    "get", "mutatingwebhookconfiguration", "rayquota-queue", check=False
                ).returncode
                == 0
            ),
            timeout_s=60,
        )
        yield dashboard_map


@pytest.fixture
def operators(queue_operator: Path, webhook_operator: Path) -> dict[bool, Operator]:
    """webhooks on/off -> the operator that runs the cell."""
    return {False: Operator("q", queue_operator), True: Operator(WEBHOOK_PREFIX, webhook_operator)}


@pytest.fixture
def environments(
    control_plane: Any, operators: dict[bool, Operator], ray_head: RayHead, second_ray_head: RayHead
) -> Iterator[Any]:
    """Makes each cell's environment; everything is removed after the test."""
    made: list[Env] = []

    def make(cell: Cell) -> Env:
        env = new_env(cell, control_plane, operators[cell.webhooks], (ray_head, second_ray_head))
        made.append(env)
        return env

    try:
        yield make
    finally:
        for env in made:
            close_env(env, control_plane)


def run(environments: Any, cells: list[Cell]) -> None:
    """``GATE_MATRIX_CELLS=a,b``: only the cells whose id contains one of these (to debug one)."""
    wanted = [w for w in os.environ.get("GATE_MATRIX_CELLS", "").split(",") if w]
    cells = [c for c in cells if not wanted or any(w in c.id for w in wanted)]
    if not cells:
        pytest.skip("no cell selected by GATE_MATRIX_CELLS")
    run_cells([(cell, functools.partial(environments, cell)) for cell in cells], scenario_of)


def test_rayjobs_and_rayclusters(environments: Any) -> None:
    run(environments, RAYJOB_CELLS + RAYCLUSTER_CELLS)


def test_jobs_and_jobsets(environments: Any) -> None:
    run(environments, JOB_CELLS + JOBSET_CELLS)


def test_rayservices_with_new_clusters(environments: Any) -> None:
    run(environments, NEW_CLUSTER_CELLS)


@pytest.mark.parametrize("cell", INCREMENTAL_CELLS, ids=lambda c: c.id)
def test_rayservices_with_incremental_upgrades(environments: Any, cell: Cell) -> None:
    """One at a time: each sets Serve's target capacity on the shared Ray heads."""
    run(environments, [cell])
