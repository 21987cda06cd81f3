"""A standalone RayCluster under quota beside KubeRay's own operator (admission-only mode).

Its first admission is gated as anywhere, by its ``spec.suspend`` (KubeRay honours it and
never writes it on a standalone cluster). Once running, though, the pods are KubeRay's to
create: when the Ray autoscaler (or a user) raises a group's ``replicas``, KubeRay creates the
new pods at once, before the larger slice is admitted; rayquota's own reconciler would have
capped them, KubeRay does not. So here every pod of a queued standalone cluster is created
behind the pod scheduling gate (``pod_gate.py``), and the pod ungater lets through only what the
recorded admission covers, with the flavor's placement: a scale-up's new pods wait, with the
reason on the Workload and in a ``PodsHeldByQuota`` event, until the grown slice is admitted.
"""

from __future__ import annotations

from rayquota.operator.queue.adapters.raycluster import RayClusterAdapter


class BesideKubeRayClusterAdapter(RayClusterAdapter):
    # The cluster's own pods (it has no children): held at their scheduling gate.
    children_held_at_pods = True
