"""The RayCluster reconciler: reads the live objects, applies the plan, writes the status.

The decisions are pure and live in raycluster_plan (pods) and raycluster_status (status).
Every reconcile starts from what the API server holds, so it can run any number of times.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.operator.config import OperatorConfig
from rayquota.operator.kube import ApiError, KubeClient, core_path, group_path, now_rfc3339
from rayquota.operator.ray import labels, rbac, services
from rayquota.operator.ray.hashing import spec_hash
from rayquota.operator.ray.raycluster_plan import ClusterPlan, node_type, plan_cluster, worker_groups
from rayquota.operator.ray.raycluster_status import cluster_status, status_changed

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL, KIND = "ray.io", "v1", "rayclusters", "RayCluster"


@dataclass
class ReconcileResult:
    requeue_after_s: float | None = None
    status: dict[str, Any] | None = None


def cluster_path(namespace: str, name: str | None = None) -> str:
    return group_path(GROUP, VERSION, namespace, PLURAL, name)


class RayClusterReconciler:
    def __init__(self, kube: KubeClient, config: OperatorConfig) -> None:
        self.kube = kube
        self.config = config

    async def reconcile(self, namespace: str, name: str) -> ReconcileResult:
        cluster = await self.kube.get(cluster_path(namespace, name))
        if cluster is None or cluster["metadata"].get("deletionTimestamp"):
            return ReconcileResult()
        if labels.managed_by_other_controller(cluster):
            return ReconcileResult()
        pods = await self._list_pods(cluster)
        plan = plan_cluster(cluster, pods, self.config.version)
        failures: list[str] = []
        head_service = None
        if plan.errors:
            previous_reason = (cluster.get("status") or {}).get("reason")
            if previous_reason != "; ".join(plan.errors):
                await self.kube.emit_event(
                    cluster, "InvalidRayClusterSpec", "; ".join(plan.errors), type_="Warning"
                )
        else:
            head_service = await self._ensure_services(cluster, failures)
            if cluster["spec"].get("enableInTreeAutoscaling"):
                await self._ensure_autoscaler_rbac(cluster, failures)
            await self._apply(cluster, plan, failures)
            if plan.changes_pods:
                pods = await self._list_pods(cluster)
        status = cluster_status(cluster, pods, head_service, plan, failures, now_rfc3339())
        if status_changed(cluster.get("status"), status):
            status["lastUpdateTime"] = now_rfc3339()
            await self.kube.patch_status(cluster_path(namespace, name), status)
        busy = plan.changes_pods or plan.suspending or failures or status.get("state") != "ready"
        return ReconcileResult(requeue_after_s=1.0 if busy else None, status=status)

    async def _list_pods(self, cluster: Mapping[str, Any]) -> list[dict[str, Any]]:
        meta = cluster["metadata"]
        pods = await self.kube.list_items(
            core_path(meta["namespace"], "pods"), labels.cluster_selector(meta["name"])
        )
        # A same-named cluster recreated quickly must not adopt the old one's pods.
        return [p for p in pods if _owned_by(p, meta["uid"])]

    async def _ensure_services(
        self, cluster: Mapping[str, Any], failures: list[str]
    ) -> dict[str, Any] | None:
        namespace = cluster["metadata"]["namespace"]
        wanted = [services.build_head_service(cluster)]
        if services.wants_serve_service(cluster):
            wanted.append(services.build_serve_service(cluster))
        head_service = None
        for manifest in wanted:
            path = core_path(namespace, "services", manifest["metadata"]["name"])
            live = await self.kube.get(path)
            if live is None:
                try:
                    live = await self.kube.create(core_path(namespace, "services"), manifest)
                    await self.kube.emit_event(
                        cluster,
                        "CreatedService",
                        f"Created service {namespace}/{manifest['metadata']['name']}",
                    )
                except ApiError as exc:
                    failures.append(f"create service {manifest['metadata']['name']}: {exc.message}")
                    await self.kube.emit_event(cluster, "FailedToCreateService", exc.message, type_="Warning")
            if manifest is wanted[0]:
                head_service = live
        return head_service

    async def _ensure_autoscaler_rbac(self, cluster: Mapping[str, Any], failures: list[str]) -> None:
        namespace = cluster["metadata"]["namespace"]
        for plural, manifest in rbac.build_autoscaler_rbac(cluster):
            if manifest["apiVersion"] == "v1":
                collection = core_path(namespace, plural)
            else:
                collection = group_path("rbac.authorization.k8s.io", "v1", namespace, plural)
            if await self.kube.get(f"{collection}/{manifest['metadata']['name']}") is not None:
                continue
            try:
                await self.kube.create(collection, manifest)
            except ApiError as exc:
                failures.append(f"create {manifest['kind']} {manifest['metadata']['name']}: {exc.message}")

    async def _apply(self, cluster: Mapping[str, Any], plan: ClusterPlan, failures: list[str]) -> None:
        namespace = cluster["metadata"]["namespace"]
        for deletion in plan.delete:
            pod_name = deletion.pod["metadata"]["name"]
            kind = "Head" if node_type(deletion.pod) == labels.HEAD_NODE else "Worker"
            try:
                if await self.kube.delete(core_path(namespace, "pods", pod_name)):
                    await self.kube.emit_event(
                        cluster,
                        f"Deleted{kind}Pod",
                        f"Deleted pod {namespace}/{pod_name}: {deletion.message}",
                    )
            except ApiError as exc:
                failures.append(f"delete pod {pod_name}: {exc.message}")
                await self.kube.emit_event(cluster, f"FailedToDelete{kind}Pod", exc.message, type_="Warning")
        if plan.restamp:
            stamp = {
                labels.OPERATOR_VERSION_ANNOTATION: self.config.version,
                labels.HASH_ANNOTATION: spec_hash(cluster["spec"]),
            }
            for pod_name in plan.restamp:
                try:
                    await self.kube.merge_patch(
                        core_path(namespace, "pods", pod_name), {"metadata": {"annotations": stamp}}
                    )
                except ApiError as exc:
                    log.warning("could not re-stamp pod %s/%s: %s", namespace, pod_name, exc)
        for manifest in plan.create:
            pod_name = manifest["metadata"]["name"]
            kind = "Head" if node_type(manifest) == labels.HEAD_NODE else "Worker"
            try:
                await self.kube.create(core_path(namespace, "pods"), manifest)
                await self.kube.emit_event(
                    cluster, f"Created{kind}Pod", f"Created pod {namespace}/{pod_name}"
                )
            except ApiError as exc:
                failures.append(f"create {kind.lower()} pod: {exc.message}")
                await self.kube.emit_event(cluster, f"FailedToCreate{kind}Pod", exc.message, type_="Warning")
        if plan.clear_workers_to_delete:
            await self._clear_workers_to_delete(cluster, plan.clear_workers_to_delete)

    async def _clear_workers_to_delete(self, cluster: Mapping[str, Any], indexes: list[int]) -> None:
        """Empty the processed lists; `test` guards against the groups having been reordered."""
        ops: list[dict[str, Any]] = []
        for index in indexes:
            group = worker_groups(cluster)[index]
            ops.append(
                {
                    "op": "test",
                    "path": f"/spec/workerGroupSpecs/{index}/groupName",
                    "value": group["groupName"],
                }
            )
            ops.append(
                {
                    "op": "replace",
                    "path": f"/spec/workerGroupSpecs/{index}/scaleStrategy/workersToDelete",
                    "value": [],
                }
            )
        meta = cluster["metadata"]
        try:
            await self.kube.json_patch(cluster_path(meta["namespace"], meta["name"]), ops)
        except ApiError as exc:
            log.info(
                "workersToDelete not cleared on %s/%s (retrying next time): %s",
                meta["namespace"],
                meta["name"],
                exc,
            )


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])
