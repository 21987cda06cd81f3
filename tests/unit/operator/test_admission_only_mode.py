"""Admission-only mode: the Ray reconcilers stay out of the operator when KubeRay runs beside it."""

from __future__ import annotations

import pytest

from rayquota.cli import build_parser
from rayquota.operator.config import OperatorConfig
from rayquota.operator.main import COMPONENTS, RAY_RECONCILERS, enabled_components


def test_reconcilers_are_on_by_default() -> None:
    config = OperatorConfig.from_env({})
    assert config.reconcilers_enabled
    assert RAY_RECONCILERS in enabled_components(config)


@pytest.mark.parametrize("raw", ["false", "False", "0", "no", "off"])
def test_the_environment_turns_the_reconcilers_off(raw: str) -> None:
    config = OperatorConfig.from_env({"RAYQUOTA_RECONCILERS_ENABLED": raw})
    assert not config.reconcilers_enabled
    components = enabled_components(config)
    assert RAY_RECONCILERS not in components
    # Everything else (the queue integration once it registers) still runs.
    assert set(components) == set(COMPONENTS) - {RAY_RECONCILERS}


def test_other_components_pass_through_admission_only_mode() -> None:
    config = OperatorConfig(reconcilers_enabled=False)
    modules = (RAY_RECONCILERS, "rayquota.operator.queue.setup")
    assert enabled_components(config, modules) == ("rayquota.operator.queue.setup",)


def test_a_misspelt_flag_is_refused_with_its_name() -> None:
    with pytest.raises(ValueError, match="RAYQUOTA_RECONCILERS_ENABLED='flase'"):
        OperatorConfig.from_env({"RAYQUOTA_RECONCILERS_ENABLED": "flase"})


def test_kueue_api_mode_setting() -> None:
    assert not OperatorConfig.from_env({}).kueue_api
    assert OperatorConfig.from_env({"RAYQUOTA_KUEUE_API": "true"}).kueue_api


@pytest.mark.parametrize(
    ("argv", "expected"),
    [([], None), (["--no-reconcilers"], False), (["--reconcilers"], True)],
)
def test_run_flag(argv: list[str], expected: bool | None) -> None:
    args = build_parser().parse_args(["run", *argv])
    assert args.reconcilers is expected
