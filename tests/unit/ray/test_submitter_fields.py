"""A RayJob's runtimeEnvYAML and entrypointResources as the dashboard submission reads them."""

from __future__ import annotations

import pytest

from rayquota.operator.ray.rayjob.submitter import entrypoint_resources, runtime_env


def test_unset_fields_are_none_and_set_ones_are_read() -> None:
    assert runtime_env({"spec": {}}) is None and entrypoint_resources({"spec": {}}) is None
    spec = {"runtimeEnvYAML": "pip: [requests]\nenv_vars: {A: b}\n", "entrypointResources": '{"accel": 2}'}
    assert runtime_env({"spec": spec}) == {"pip": ["requests"], "env_vars": {"A": "b"}}
    assert entrypoint_resources({"spec": spec}) == {"accel": 2.0}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"runtimeEnvYAML": "- a list"}, "spec.runtimeEnvYAML must be a YAML mapping"),
        ({"entrypointResources": "[1]"}, "spec.entrypointResources must be a JSON object"),
    ],
)
def test_a_field_that_is_no_mapping_is_refused_by_name(spec: dict[str, str], message: str) -> None:
    read = runtime_env if "runtimeEnvYAML" in spec else entrypoint_resources
    with pytest.raises(ValueError, match=message):
        read({"spec": spec})
