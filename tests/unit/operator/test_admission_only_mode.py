"""Admission-only mode: the Ray reconcilers stay out of the operator when KubeRay runs beside it."""

from __future__ import annotations

import pytest

from rayquota.cli import build_parser
from rayquota.operator.permissions import offline_manager
from tests.config_env import operator_config_from_env


def test_reconcilers_are_on_by_default() -> None:
    config = operator_config_from_env({})
    assert config.reconcilers_enabled
    _, components = offline_manager(config)
    assert components == ("ray", "raycronjob", "queue")


@pytest.mark.parametrize("raw", ["false", "False", "0", "no", "off"])
def test_the_environment_turns_the_reconcilers_off(raw: str) -> None:
    config = operator_config_from_env({"RAYQUOTA_RECONCILERS_ENABLED": raw})
    assert not config.reconcilers_enabled
    manager, components = offline_manager(config)
    # Everything else still runs: the queue integration, without the Ray controllers' watches.
    assert components == ("queue",)
    assert not [c for c in manager.controllers if c.name.startswith("ray")]


def test_a_misspelt_flag_is_refused_with_its_name() -> None:
    with pytest.raises(ValueError, match="RAYQUOTA_RECONCILERS_ENABLED='flase'"):
        operator_config_from_env({"RAYQUOTA_RECONCILERS_ENABLED": "flase"})


@pytest.mark.parametrize(
    ("argv", "expected"),
    [([], None), (["--no-reconcilers"], False), (["--reconcilers"], True)],
)
def test_run_flag(argv: list[str], expected: bool | None) -> None:
    args = build_parser().parse_args(["run", *argv])
    assert args.reconcilers is expected
