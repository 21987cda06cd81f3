"""Kueue's topology annotations read from pod templates, the Workload's topologyRequest and
topologyAssignment in both API groups' shapes, and what the demand of a Ray object carries."""

from __future__ import annotations

from typing import Any

import pytest

from rayquota.operator.queue.adapters.raycluster import raycluster_demand
from rayquota.operator.queue.adapters.rayservice import rayservice_demand
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.demand import topology_request
from rayquota.operator.queue.kueue import kueue_shapes
from rayquota.queueing import (
    HOSTNAME_LABEL,
    TopologyAssignment,
    TopologyDomain,
    TopologyMode,
    TopologyRequest,
)

RACK = "topology.rayquota.io/rack"


def template(**annotations: str) -> dict[str, Any]:
    return {"metadata": {"annotations": annotations}, "spec": {"containers": []}}


def ann(name: str) -> str:
    return f"kueue.x-k8s.io/podset-{name}"


def test_no_annotation_is_no_request() -> None:
    assert topology_request.read({"spec": {}}, "t") is None
    assert topology_request.read(template(other="x"), "t") is None


def test_required_preferred_unconstrained_slices_and_groups() -> None:
    assert topology_request.read(template(**{ann("required-topology"): RACK}), "t") == TopologyRequest(
        TopologyMode.REQUIRED, RACK
    )
    assert topology_request.read(template(**{ann("preferred-topology"): RACK}), "t") == TopologyRequest(
        TopologyMode.PREFERRED, RACK
    )
    assert (
        topology_request.read(template(**{ann("unconstrained-topology"): "true"}), "t") == TopologyRequest()
    )
    sliced = template(
        **{ann("slice-required-topology"): RACK, ann("slice-size"): "2", ann("group-name"): "g"}
    )
    assert topology_request.read(sliced, "t") == TopologyRequest(
        TopologyMode.UNCONSTRAINED, None, RACK, 2, "g"
    )


def test_a_multi_host_group_is_a_natural_slice() -> None:
    request = topology_request.read(template(**{ann("slice-required-topology"): RACK}), "t", hosts=4)
    assert request is not None and request.slice_size == 4


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({ann("required-topology"): RACK, ann("preferred-topology"): RACK}, "exclude each other"),
        ({ann("slice-required-topology"): RACK, ann("slice-size"): "two"}, "'two' is not a positive integer"),
        ({ann("slice-size"): "2"}, "needs kueue.x-k8s.io/podset-slice-required-topology"),
        ({ann("slice-required-topology"): RACK}, "needs kueue.x-k8s.io/podset-slice-size"),
        ({ann("unconstrained-topology"): "yes"}, "'yes' is not true or false"),
        ({ann("required-topology"): "a rack"}, "'a rack' is not a node label"),
    ],
)
def test_bad_annotations_are_named_with_their_value(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(topology_request.TopologyAnnotationError) as raised:
        topology_request.read(template(**annotations), "worker group gpu's pod template")
    assert str(raised.value).startswith("worker group gpu's pod template: ")
    assert message in str(raised.value)


def cluster(worker_annotations: dict[str, str], hosts: int = 1, replicas: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "headGroupSpec": {
                "template": template(**{ann("required-topology"): RACK, ann("group-name"): "ray"})
            },
            "workerGroupSpecs": [
                {
                    "groupName": "gpu",
                    "replicas": replicas,
                    "numOfHosts": hosts,
                    "template": template(**worker_annotations),
                }
            ],
        },
    }


def test_a_rayclusters_demand_carries_its_groups_requests() -> None:
    demand = raycluster_demand(cluster({ann("slice-required-topology"): RACK}, hosts=4, replicas=2))
    head, workers = demand.pod_sets
    assert head.topology_request == TopologyRequest(TopologyMode.REQUIRED, RACK, group="ray")
    assert workers.count == 8
    assert workers.topology_request == TopologyRequest(TopologyMode.UNCONSTRAINED, None, RACK, 4)


def test_a_bad_annotation_makes_an_invalid_request_naming_the_template() -> None:
    (_, workers) = raycluster_demand(cluster({ann("slice-size"): "0"})).pod_sets
    assert workers.topology_request is not None
    assert workers.topology_request.invalid == (
        "worker group gpu's pod template: annotation kueue.x-k8s.io/podset-slice-size: '0' "
        "is not a positive integer"
    )


def test_a_rayservices_placed_groups_stay_apart_per_cluster() -> None:
    annotations = {ann("required-topology"): RACK, ann("group-name"): "ray"}
    old, new = cluster(annotations), cluster(annotations)
    old["metadata"]["name"], new["metadata"]["name"] = "svc-old", "svc-new"
    demand = rayservice_demand({"metadata": {"name": "svc"}, "spec": {}}, [old, new])
    assert len(demand.pod_sets) == 4  # head and workers of each cluster: not merged across clusters
    groups = {ps.topology_request.group for ps in demand.pod_sets if ps.topology_request}
    assert groups == {"ray/svc-old", "ray/svc-new"}


def test_workload_pod_sets_round_trip_the_request() -> None:
    (head, workers) = raycluster_demand(cluster({ann("preferred-topology"): RACK})).pod_sets
    api = converter.api_pod_set(workers)
    assert api["topologyRequest"] == {"preferred": RACK}
    body = {
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"podSets": [api, converter.api_pod_set(head)]},
    }
    wl = converter.workload(body)
    assert wl.pod_sets[0].topology_request == TopologyRequest(TopologyMode.PREFERRED, RACK)
    assert wl.pod_sets[1].topology_request == TopologyRequest(TopologyMode.REQUIRED, RACK, group="ray")
    assert wl.pod_owner == "ns/w"


def test_kueues_perf_runner_workload_reads_as_sliced_unconstrained() -> None:
    body = {
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {
            "podSets": [
                {
                    "name": "main",
                    "count": 4,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                    },
                    "topologyRequest": {"podSetSliceRequiredTopology": RACK, "podSetSliceSize": 2},
                }
            ]
        },
    }
    assert converter.workload(body).pod_sets[0].topology_request == TopologyRequest(
        TopologyMode.UNCONSTRAINED, None, RACK, 2
    )


ASSIGNMENT = TopologyAssignment(
    (HOSTNAME_LABEL,),
    (
        TopologyDomain(("node-b0-r1-n1",), 2),
        TopologyDomain(("node-b0-r1-n12",), 2),
        TopologyDomain(("n3",), 1),
    ),
)


def test_assignment_v1beta1_shape_and_back() -> None:
    api = converter.topology_assignment_to_api(ASSIGNMENT)
    assert api == {
        "levels": [HOSTNAME_LABEL],
        "domains": [
            {"values": ["node-b0-r1-n1"], "count": 2},
            {"values": ["node-b0-r1-n12"], "count": 2},
            {"values": ["n3"], "count": 1},
        ],
    }
    assert converter.topology_assignment_from_api(api) == ASSIGNMENT


def test_assignment_kueue_v1beta2_slices_and_back() -> None:
    v1beta1 = converter.topology_assignment_to_api(ASSIGNMENT)
    slices = kueue_shapes.topology_assignment_to_slices(v1beta1)
    assert slices == {
        "levels": [HOSTNAME_LABEL],
        "slices": [
            {
                "domainCount": 3,
                "valuesPerLevel": [
                    {"individual": {"prefix": "n", "roots": ["ode-b0-r1-n1", "ode-b0-r1-n12", "3"]}}
                ],
                "podCounts": {"individual": [2, 2, 1]},
            }
        ],
    }
    assert converter.topology_assignment_from_api(slices) == ASSIGNMENT
    same_prefix = TopologyAssignment(
        ("block", "rack"), (TopologyDomain(("b", "rack-1"), 3), TopologyDomain(("b", "rack-2"), 3))
    )
    shaped = kueue_shapes.topology_assignment_to_slices(converter.topology_assignment_to_api(same_prefix))
    assert shaped["slices"][0]["valuesPerLevel"] == [
        {"universal": "b"},
        {"individual": {"prefix": "rack-", "roots": ["1", "2"]}},
    ]
    assert shaped["slices"][0]["podCounts"] == {"universal": 3}
    assert converter.topology_assignment_from_api(shaped) == same_prefix


def test_kueues_own_example_with_suffix_and_several_slices_reads() -> None:
    raw = {
        "levels": [HOSTNAME_LABEL],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [
                    {"individual": {"prefix": "block-1-rack-", "roots": ["1", "2"], "suffix": "-x"}}
                ],
                "podCounts": {"universal": 1},
            },
            {"domainCount": 1, "valuesPerLevel": [{"universal": "n9"}], "podCounts": {"individual": [4]}},
        ],
    }
    assert converter.topology_assignment_from_api(raw) == TopologyAssignment(
        (HOSTNAME_LABEL,),
        (
            TopologyDomain(("block-1-rack-1-x",), 1),
            TopologyDomain(("block-1-rack-2-x",), 1),
            TopologyDomain(("n9",), 4),
        ),
    )


def test_flavor_topology_name_and_the_topology_kind() -> None:
    assert converter.flavor_from_spec("f", {"topologyName": "dc"}).topology_name == "dc"
    body = {
        "metadata": {"name": "dc"},
        "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOSTNAME_LABEL}]},
    }
    assert converter.topology(body).levels == (RACK, HOSTNAME_LABEL)
    with pytest.raises(converter.ConversionError, match=r"topology dc\.spec\.levels"):
        converter.topology({"metadata": {"name": "dc"}, "spec": {"levels": [{}]}})
