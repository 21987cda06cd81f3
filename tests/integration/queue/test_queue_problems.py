"""A ClusterQueue naming a ResourceFlavor that does not exist, on the local control plane with
the operator running: inactive in kubectl (Active=False, FlavorNotFound) with a Warning event,
in ``rayquota queues`` and ``explain``; nothing is admitted through it until the flavor exists."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from rayquota import cli_views
from tests.integration.queue.conftest import Quota, admitted_workload, gpu_rayjob, workload_of
from tests.integration.ray.kubehelpers import Kube, condition, wait_for


def test_a_queue_naming_a_missing_flavor_is_inactive_and_admits_nothing_until_it_exists(
    queue_operator: Path, kube: Kube, quota: Quota, control_plane: Any
) -> None:
    a10g = quota.name("a10g")  # never created (yet)
    cq = quota.cluster_queue("typo", {a10g: 4})
    quota.local_queue("typo", cq)

    def inactive() -> dict[str, Any] | None:
        active = condition(kube.get("clusterqueues.rayquota.io", cq), "Active") or {}
        return active if active.get("status") == "False" else None

    active = wait_for("the ClusterQueue inactive", inactive, timeout_s=60)
    assert active["reason"] == "FlavorNotFound"
    assert active["message"] == f"Can't admit new workloads: ResourceFlavor {a10g} not found"
    shown = control_plane.kubectl("get", "clusterqueue.rayquota.io", cq).stdout
    header, row = shown.splitlines()[:2]
    assert row[header.index("ACTIVE") :].split()[0] == "False", shown  # the printer column
    wait_for(
        "a Warning event on the ClusterQueue",
        lambda: any(
            (e["type"], e["reason"]) == ("Warning", "FlavorNotFound")
            for e in _cluster_events(control_plane, cq)
        ),
        timeout_s=60,
    )
    kube.apply(gpu_rayjob("waits", "typo", workers=1, gpus_per_worker=1))
    wait_for("the Workload", lambda: workload_of(kube, "RayJob", "waits"), timeout_s=60)

    state = asyncio.run(cli_views.fetch_state())
    table = cli_views.queues_table(state)
    [row] = [line for line in table.splitlines() if line.startswith(cq + " ")]
    assert row.rstrip().endswith("False (FlavorNotFound)"), table
    explained = cli_views.explain(state, "rayjob", "waits", kube.ns)
    assert "the ClusterQueue is inactive (FlavorNotFound)" in explained, explained
    assert f"free now: {a10g} (no such ResourceFlavor)" in explained, explained
    wl = workload_of(kube, "RayJob", "waits")
    assert wl is not None and not (wl.get("status") or {}).get("admission")

    quota.flavor("a10g", "a100")  # the missing flavor created: the queue turns active and admits
    admitted_workload(kube, "RayJob", "waits", timeout_s=60)
    # The status writer says so on its own pace: the admission may be written first.
    wait_for(
        "the ClusterQueue active again",
        lambda: (
            (condition(kube.get("clusterqueues.rayquota.io", cq), "Active") or {}).get("status") == "True"
        ),
        timeout_s=60,
    )


def _cluster_events(control_plane: Any, name: str) -> list[dict[str, Any]]:
    """Events about a cluster-scoped object (recorded in the default namespace)."""
    out = control_plane.kubectl("get", "events", "-A", "-o", "json").stdout
    return [e for e in json.loads(out)["items"] if e["involvedObject"].get("name") == name]
