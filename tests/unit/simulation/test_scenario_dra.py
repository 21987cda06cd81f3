"""The simulator charges DRA devices (a workload class's ``resourceClaims``) as the operator does."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from rayquota.operator.queue.demand import podsets
from rayquota.operator.queue.dra.context import ClaimReading
from rayquota.operator.queue.dra.settings import DraSettings, mappings_from
from rayquota.simulation.report import build_report
from rayquota.simulation.scenario import ScenarioError, parse_scenario
from rayquota.simulation.simulator import Simulation

QUEUES = """
name: {name}
flavors: [{{name: a100}}]
clusterQueues:
  - name: team
    resourceGroups:
      - coveredResources: [cpu, {resource}]
        flavors:
          - name: a100
            resources: [{{name: cpu, nominalQuota: 64}}, {{name: {resource}, nominalQuota: 4}}]
"""

DRA = """
deviceClassMappings:
  - {name: example.com/gpu, deviceClassNames: [gpu.example.com]}
resourceClaimTemplates:
  - metadata: {name: two-gpus}
    spec: {spec: {devices: {requests: [{name: gpus, exactly: {deviceClassName: gpu.example.com, count: 2}}]}}}
workloadClasses:
  - {name: train, count: 6, interval: 0.1, runtime: 10, pods: 1, requests: {cpu: 1},
     resourceClaims: [{name: gpus, resourceClaimTemplateName: two-gpus}]}
"""

EXTENDED = """
workloadClasses:
  - {name: train, count: 6, interval: 0.1, runtime: 10, pods: 1, requests: {cpu: 1, nvidia.com/gpu: 2}}
"""


def _scenario(name: str, resource: str, body: str) -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(QUEUES.format(name=name, resource=resource))
    raw.update(yaml.safe_load(body))
    return raw


def _first_request(raw: dict[str, Any]) -> dict[str, Any]:
    request: dict[str, Any] = raw["resourceClaimTemplates"][0]["spec"]["spec"]["devices"]["requests"][0]
    exactly: dict[str, Any] = request["exactly"]
    return exactly


def test_claims_are_charged_as_the_operator_charges_them() -> None:
    raw = _scenario("dra", "example.com/gpu", DRA)
    pod_set = parse_scenario(raw).classes[0].pod_set
    templates = {t["metadata"]["name"]: t for t in raw["resourceClaimTemplates"]}
    settings = DraSettings(mappings=mappings_from(raw["deviceClassMappings"]))
    template = {
        "spec": {
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
            "resourceClaims": raw["workloadClasses"][0]["resourceClaims"],
        }
    }
    claims = ClaimReading(settings, templates.get)
    operator = podsets.pod_set("main", podsets.Role.MAIN, 1, template, claims=claims)
    assert dict(pod_set.requests) == dict(operator.requests) == {"cpu": 1000, "example.com/gpu": 2000}


def test_dra_scenario_runs_like_its_extended_resource_twin() -> None:
    dra_report = build_report(Simulation(parse_scenario(_scenario("dra", "example.com/gpu", DRA))).run())
    twin = build_report(Simulation(parse_scenario(_scenario("ext", "nvidia.com/gpu", EXTENDED))).run())
    # 6 x 2 devices on a quota of 4: two at a time, three waves of 10 s.
    assert dra_report["admitted"] == twin["admitted"] == 6
    assert dra_report["makespan_s"] == twin["makespan_s"] >= 30
    assert dra_report["classes"]["train"]["wait_s"] == twin["classes"]["train"]["wait_s"]
    assert dra_report["utilisation_mean"]["example.com/gpu"] == twin["utilisation_mean"]["nvidia.com/gpu"]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (
            lambda raw: raw.update(deviceClassMappings=[{"name": "x.com/g", "deviceClassNames": ["other"]}]),
            "ResourceClaimTemplate two-gpus asks for DeviceClass 'gpu.example.com', which no "
            "resources.deviceClassMappings entry maps",
        ),
        (
            lambda raw: _first_request(raw).update(allocationMode="All"),
            "exactly.allocationMode: 'All' is not supported",
        ),
        (lambda raw: raw.pop("resourceClaimTemplates"), "ResourceClaimTemplate(s) ['two-gpus'] not in"),
        (lambda raw: raw.pop("deviceClassMappings"), "no resources.deviceClassMappings are configured"),
        (
            lambda raw: raw.update(deviceClassMappings=[{"name": "no spaces", "deviceClassNames": ["a"]}]),
            "deviceClassMappings: resources.deviceClassMappings[0].name: 'no spaces' is not a resource name",
        ),
    ],
)
def test_claims_the_operator_refuses_are_scenario_errors(change: Any, words: str) -> None:
    raw = _scenario("dra", "example.com/gpu", DRA)
    change(raw)
    with pytest.raises(ScenarioError) as error:
        parse_scenario(raw)
    assert words in str(error.value)
    assert "workloadClass train" in str(error.value) or "deviceClassMappings" in str(error.value)
