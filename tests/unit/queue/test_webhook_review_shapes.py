"""The mutating webhook sees a document before the API server's schema does: any field may
hold any type. Whatever the shape, the webhook answers (a refusal or an allowance); it never
fails with a traceback, which the API server would report without naming the field."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rayquota.operator.queue import naming
from rayquota.operator.webhooks import review
from tests.unit.queue import bodies
from tests.unit.queue.test_webhook_review import objects

Path = tuple[str | int, ...]
ODD_VALUES: tuple[Any, ...] = (1.5, "text", 7, True, None, [], ["x"], {}, {"k": "v"})


def paths(doc: Any, path: Path = ()) -> Iterator[Path]:
    """Every node below the root: mappings, lists and leaves."""
    if isinstance(doc, dict):
        items: Any = doc.items()
    elif isinstance(doc, list):
        items = enumerate(doc)
    else:
        return
    for key, value in items:
        yield (*path, key)
        yield from paths(value, (*path, key))


def replaced(doc: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node: Any = out
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return out


def queued_service() -> dict[str, Any]:
    service = bodies.rayservice()
    service["metadata"]["labels"] = {naming.QUEUE_LABEL: "team-a"}
    return service


def queued_cluster() -> dict[str, Any]:
    return bodies.raycluster(**{naming.QUEUE_LABEL: "team-a"})


# A batch/v1 Job is not here: the API server decodes a built-in kind, types and all, before any
# webhook sees it.
DOCUMENTS = {
    "RayCluster": queued_cluster,
    "RayJob": bodies.rayjob,
    "RayService": queued_service,
}


@pytest.mark.parametrize("kind", sorted(DOCUMENTS))
def test_the_mutating_webhook_answers_whatever_type_a_field_holds(kind: str) -> None:
    valid = DOCUMENTS[kind]()
    store = objects()
    failures: list[str] = []
    for path in paths(valid):
        if path[:1] == ("metadata",):
            continue  # the API server decodes object metadata before any webhook is called
        for value in ODD_VALUES:
            try:
                verdict = review.mutate(kind, replaced(valid, path, value), store)
            except Exception as exc:
                failures.append(f"{path} = {value!r}: {type(exc).__name__}: {exc}")
            else:
                assert isinstance(verdict, review.Verdict)
    assert not failures, "\n".join(failures[:40])


def cluster_queue() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "gpus"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "a100",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "64"},
                                {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": "2"},
                            ],
                        }
                    ],
                }
            ],
        },
    }


def cohort() -> dict[str, Any]:
    """A Cohort with quota of its own: the same resourceGroups as the ClusterQueue's."""
    return {
        "apiVersion": "rayquota.io/v1alpha1",
        "kind": "Cohort",
        "metadata": {"name": "research"},
        "spec": {
            "parent": "org",
            "resourceGroups": cluster_queue()["spec"]["resourceGroups"],
            "fairSharing": {"weight": "1"},
        },
    }


# The kinds whose quota the webhook checks, each with a valid document and its check.
QUOTA_OBJECTS: dict[str, tuple[Callable[[], dict[str, Any]], Callable[[dict[str, Any]], review.Verdict]]] = {
    "ClusterQueue": (cluster_queue, review.validate_cluster_queue),
    "Cohort": (cohort, review.validate_cohort),
}


@pytest.mark.parametrize("kind", sorted(QUOTA_OBJECTS))
def test_the_quota_webhooks_answer_whatever_type_a_field_holds(kind: str) -> None:
    build, validate = QUOTA_OBJECTS[kind]
    valid = build()
    assert validate(valid).allowed
    failures: list[str] = []
    for path in paths(valid):
        if path[:1] == ("metadata",):
            continue
        for value in ODD_VALUES:
            try:
                validate(replaced(valid, path, value))
            except Exception as exc:
                failures.append(f"{path} = {value!r}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures[:40])


@pytest.mark.parametrize("kind", sorted(QUOTA_OBJECTS))
@pytest.mark.parametrize("field", ["nominalQuota", "borrowingLimit", "lendingLimit"])
@pytest.mark.parametrize("value", ["1e1000", "-1", "abc", "1.2.3", "8 GPUs"])
def test_a_bad_quota_quantity_is_refused_naming_its_field_and_value(
    kind: str, field: str, value: str
) -> None:
    build, validate = QUOTA_OBJECTS[kind]
    doc = build()
    doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1][field] = value
    verdict = validate(doc)
    assert not verdict.allowed
    assert verdict.message.startswith(f"invalid {kind} {doc['metadata']['name']}: ")
    assert f"spec.resourceGroups[0].flavors[0].resources[1].{field}" in verdict.message
    assert value in verdict.message
