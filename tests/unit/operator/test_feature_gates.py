"""KubeRay's feature gates: honoured where rayquota can, refused by name where it cannot."""

from __future__ import annotations

import pytest

from rayquota.operator.feature_gates import KUBERAY_GATES, FeatureGates, GateSupport, refusal
from tests.config_env import operator_config_from_env


def test_kuberays_defaults_are_accepted_and_the_cron_switch_is_read() -> None:
    kuberay_defaults = ",".join(
        f"{name}={str(gate.kuberay_default).lower()}" for name, gate in KUBERAY_GATES.items()
    )
    gates = FeatureGates.parse(kuberay_defaults)
    assert gates.enabled("RayCronJob") is False  # KubeRay's default: alpha, off
    assert FeatureGates().enabled("RayCronJob") is True  # rayquota's own default
    assert FeatureGates.parse("RayCronJob=false").enabled("RayCronJob") is False


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("RayClusterStatusConditions=false", "RayClusterStatusConditions=false: rayquota always runs"),
        ("RayClusterMTLS=true", "RayClusterMTLS=true: rayquota does not implement"),
        ("RayCronJobs=true", "unknown feature gate 'RayCronJobs'"),
        ("RayCronJob", "expected Name=true or Name=false"),
        ("RayCronJob=yes", "expected Name=true or Name=false"),
    ],
)
def test_what_cannot_be_honoured_is_refused_by_name(setting: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FeatureGates.parse(setting)


def test_every_gate_has_exactly_one_refused_value_unless_it_is_a_switch() -> None:
    for name, gate in KUBERAY_GATES.items():
        refused = [value for value in (True, False) if refusal(name, value) is not None]
        expected = {
            GateSupport.ALWAYS_ON: [False],
            GateSupport.NOT_IMPLEMENTED: [True],
            GateSupport.SWITCH: [],
        }
        assert refused == expected[gate.support], name


def test_the_environment_names_the_variable_in_its_error() -> None:
    with pytest.raises(ValueError, match=r"RAYQUOTA_FEATURE_GATES\): feature gate KubernetesWAS=true"):
        operator_config_from_env({"RAYQUOTA_FEATURE_GATES": "KubernetesWAS=true"})
    config = operator_config_from_env(
        {"RAYQUOTA_FEATURE_GATES": "RayCronJob=false", "RAYQUOTA_QUEUE_ENABLED": "false"}
    )
    assert not config.feature_gates.enabled("RayCronJob") and not config.queue_enabled
