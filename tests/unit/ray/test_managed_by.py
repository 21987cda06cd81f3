from __future__ import annotations

import pytest

from rayquota.operator.ray.vocabulary.labels import managed_by_other_controller


@pytest.mark.parametrize("value", [None, "", "ray.io/kuberay-operator", "rayquota.io/operator"])
def test_objects_without_a_foreign_manager_are_ours(value: str | None) -> None:
    spec = {} if value is None else {"managedBy": value}
    assert managed_by_other_controller({"spec": spec}) is None


def test_a_foreign_manager_is_named() -> None:
    body = {"spec": {"managedBy": "kueue.x-k8s.io/multikueue"}}
    assert managed_by_other_controller(body) == "kueue.x-k8s.io/multikueue"
