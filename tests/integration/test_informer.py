"""The informer against the real API server: server-side label selection, watch events, and a
relist that reports what was deleted while nobody watched."""

from __future__ import annotations

import asyncio
from typing import Any

from rayquota.operator.core import Informer, NamespaceScope, ObjectKey, resources
from rayquota.operator.kube import KubeClient
from tests.polling import wait_for_async


def pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeSelector": {"no": "such-node"}},
    }


async def wait_until(what: str, probe: Any, timeout_s: float = 30.0) -> None:
    await wait_for_async(what, probe, timeout_s, interval_s=0.05)


async def test_selector_events_and_relist(control_plane: Any, namespace: str) -> None:
    client = KubeClient.from_environment(str(control_plane.kubeconfig))
    seen: list[tuple[str, str]] = []
    informer = Informer(
        client, resources.PODS, NamespaceScope.of([namespace]), label_selector="ray.io/cluster"
    )
    informer.on_change(lambda kind, obj, old: seen.append((kind, obj["metadata"]["name"])))
    try:
        await client.create(resources.PODS.path(namespace), pod("before", {"ray.io/cluster": "c"}))
        task = asyncio.create_task(informer.run())
        await asyncio.wait_for(informer.synced.wait(), 30)
        assert informer.store.get(namespace, "before") is not None

        await client.create(resources.PODS.path(namespace), pod("ours", {"ray.io/cluster": "c"}))
        await client.create(resources.PODS.path(namespace), pod("not-ours", {"app": "web"}))
        await wait_until("the labelled pod", lambda: informer.store.get(namespace, "ours") is not None)
        # The API server filters: the unlabelled pod never reaches the process.
        assert informer.store.get(namespace, "not-ours") is None
        assert ("ADDED", "not-ours") not in seen
        assert "managedFields" not in informer.store.get(namespace, "ours")["metadata"]

        # Stop watching, delete a pod meanwhile: the next LIST reports it as deleted.
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.delete(resources.PODS.path(namespace, "before"), grace_seconds=0)

        async def gone() -> bool:  # an unscheduled pod deleted with grace 0 goes at once; make sure
            return await client.get(resources.PODS.path(namespace, "before")) is None

        await wait_for_async("the deleted pod gone", gone, timeout_s=30, interval_s=0.05)
        relists = informer.relists
        task = asyncio.create_task(informer.run())
        await wait_until("the relist", lambda: informer.relists > relists)
        await wait_until("the deletion to be reported", lambda: ("DELETED", "before") in seen)
        assert ObjectKey(namespace, "before") not in informer.store
        assert informer.store.get(namespace, "ours") is not None
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    finally:
        await client.close()
