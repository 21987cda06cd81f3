"""A RayJob under quota beside KubeRay's own operator (admission-only mode).

Its first admission is gated like any RayJob's, by its ``spec.suspend`` (KubeRay honours it
and never writes it). Once it runs, its RayCluster is KubeRay's: when the Ray autoscaler (or a
user) raises a worker group's ``replicas`` on that cluster, KubeRay creates the new pods at
once, and the RayJob's own ``rayClusterSpec`` never changes. So here, as for a standalone
RayCluster (``raycluster_beside.py``):

- the demand follows the live cluster's worker replicas (per group name), not the replicas
  the RayJob was written with: a scale-up asks for the larger slice;
- every pod of the RayJob's cluster is created behind the pod scheduling gate
  (``pod_gate.py``), and the pod ungater lets through only what the recorded admission
  covers: a scale-up's new pods wait, with the reason on the Workload and in a
  ``PodsHeldByQuota`` event on the cluster, until the grown slice is admitted.

One more difference: a ``submitterPodTemplate`` the user did not write is never created to
carry the flavor's placement. KubeRay takes a present template as the whole submitter pod (it
builds its default only when the field is absent) and fails on one without containers. Such a
submitter pod is held by the pod webhook and let through with its placement instead (see
docs/install.md)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.operator.queue.adapters.protocol import Body, Edit
from rayquota.operator.queue.adapters.rayjob import RayJobAdapter, rayjob_demand
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.demand.podsets import Demand
from rayquota.queueing import ResourceFlavor


def live_replicas(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """worker group name -> the replicas the live cluster asks for (as written there)."""
    groups = (cluster.get("spec") or {}).get("workerGroupSpecs") or ()
    return {str(g.get("groupName") or ""): g.get("replicas") for g in groups if "replicas" in g}


def with_live_replicas(rayjob: Body, cluster: Mapping[str, Any]) -> Body | None:
    """The RayJob as if its ``rayClusterSpec`` asked for the live cluster's replicas (None:
    they are the same already)."""
    replicas = live_replicas(cluster)
    groups = ((rayjob.get("spec") or {}).get("rayClusterSpec") or {}).get("workerGroupSpecs") or ()
    changes = {
        i: replicas[str(g.get("groupName") or "")]
        for i, g in enumerate(groups)
        if str(g.get("groupName") or "") in replicas
        and g.get("replicas") != replicas[str(g.get("groupName") or "")]
    }
    if not changes:
        return None
    out = copy.deepcopy(dict(rayjob))
    for i, value in changes.items():
        out["spec"]["rayClusterSpec"]["workerGroupSpecs"][i]["replicas"] = value
    return out


class BesideKubeRayJobAdapter(RayJobAdapter):
    # The cluster KubeRay creates for it: its pods held at their scheduling gate.
    children_held_at_pods = True

    def pod_sets(self, obj: Body, children: Sequence[Body]) -> Demand:
        scaled = with_live_replicas(obj, children[0]) if children else None
        if scaled is None:
            return super().pod_sets(obj, children)
        # Not memoised: the RayJob's generation does not change with its cluster's replicas.
        return rayjob_demand(scaled, str(children[0]["metadata"]["name"]), claims=self.claim_reading(obj))

    def run_with(
        self,
        obj: Body,
        children: Sequence[Body],
        admission: AdmittedSlice,
        flavors: Mapping[str, ResourceFlavor],
    ) -> list[Edit]:
        edits = super().run_with(obj, children, admission, flavors)
        if "submitterPodTemplate" in (obj.get("spec") or {}):
            return edits
        out: list[Edit] = []
        for edit in edits:
            if edit.kind == self.kind:
                edit.body["spec"].pop("submitterPodTemplate", None)
                if edit.body == obj:
                    continue
            out.append(edit)
        return out
