"""kubectl rayquota create/list resourceflavor: kueuectl's flags into a ResourceFlavor."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rayquota import kueuectl_flavors as flavors
from rayquota.api.queueing_v1alpha1 import ResourceFlavor
from rayquota.kueuectl_bodies import FlagError
from rayquota.operator.queue.kueue.api_group import KUEUE, RAYQUOTA


def test_resource_flavor_body_is_a_valid_resource_flavor() -> None:
    body = flavors.resource_flavor_body(
        RAYQUOTA,
        "a100",
        "cloud.google.com/gke-accelerator=nvidia-a100,pool=gpu",
        "nvidia.com/gpu=present:NoSchedule,spot:PreferNoSchedule",
        "nvidia.com/gpu=present:NoSchedule,spot,:NoExecute",
    )
    assert body["apiVersion"] == "rayquota.io/v1alpha1"
    assert body["spec"] == {
        "nodeLabels": {"cloud.google.com/gke-accelerator": "nvidia-a100", "pool": "gpu"},
        "nodeTaints": [
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
            {"key": "spot", "effect": "PreferNoSchedule"},
        ],
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
            {"key": "spot", "operator": "Exists"},
            {"operator": "Exists", "effect": "NoExecute"},
        ],
    }
    ResourceFlavor.model_validate(body)


def test_a_bare_flavor_and_kueue_mode() -> None:
    body = flavors.resource_flavor_body(KUEUE, "default", None, None, None)
    assert body == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "default"},
        "spec": {},
    }


@pytest.mark.parametrize(
    ("labels", "taints", "tolerated", "words"),
    [
        ("pool", None, None, ["--node-labels 'pool'"]),
        ("pool=a b", None, None, ["--node-labels 'pool=a b'"]),
        (None, "spot", None, ["--node-taints 'spot'", "KEY[=VALUE]:EFFECT"]),
        (None, "spot:Never", None, ["--node-taints 'spot:Never'", "effect 'Never'"]),
        (None, "spot:NoSchedule,spot=x:NoSchedule", None, ["given twice"]),
        (None, None, "=x", ["--tolerations '=x'", "needs a key"]),
        (None, None, "a:b:c", ["--tolerations 'a:b:c'"]),
    ],
)
def test_bad_flavor_flags_are_refused_by_flag_and_value(
    labels: str | None, taints: str | None, tolerated: str | None, words: list[str]
) -> None:
    with pytest.raises(FlagError) as refused:
        flavors.resource_flavor_body(RAYQUOTA, "f", labels, taints, tolerated)
    for word in words:
        assert word in str(refused.value)


def test_resource_flavor_row_sorts_the_labels() -> None:
    flavor = {
        "metadata": {"name": "a100", "creationTimestamp": "2026-01-01T11:59:00Z"},
        "spec": {"nodeLabels": {"zone": "b", "pool": "gpu"}},
    }
    assert flavors.resource_flavor_row(flavor, datetime(2026, 1, 1, 12, 0, tzinfo=UTC)) == [
        "a100",
        "pool=gpu, zone=b",
        "60s",
    ]
