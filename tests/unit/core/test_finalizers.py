"""Taking a finalizer off: a conditional merge patch; an object already gone counts as done (a
retried removal whose first attempt was stored but answered with an error finds it gone: seen
when etcd was killed under the operator, tests/integration/faults/test_etcd_restart.py)."""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest
from aiohttp import web

from rayquota.operator.core.finalizers import set_finalizer
from rayquota.operator.kube import KubeClient, NotFound
from tests.loopback_server import serving

FINALIZERS = ["ray.io/rayjob-finalizer", "x"]
RAYJOB = {"metadata": {"name": "job", "resourceVersion": "41", "finalizers": FINALIZERS}}
PATH = "/apis/ray.io/v1/namespaces/ns/rayjobs/job"


async def _patched(answer: int) -> tuple[list[dict[str, Any]], Any]:
    bodies: list[dict[str, Any]] = []

    async def patch(request: web.Request) -> web.Response:
        bodies.append(await request.json())
        if answer == 404:
            return web.json_response({"message": 'rayjobs.ray.io "job" not found'}, status=404)
        return web.json_response({"metadata": {"name": "job"}})

    app = web.Application()
    app.router.add_patch(PATH, patch)
    return bodies, app


async def test_removal_is_a_conditional_patch_of_the_other_finalizers() -> None:
    bodies, app = await _patched(200)
    async with serving(app) as port:
        client = KubeClient(kubernetes.client.Configuration(host=f"http://127.0.0.1:{port}"))
        await set_finalizer(client, PATH, RAYJOB, "ray.io/rayjob-finalizer", present=False)
        await client.close()
    assert bodies == [{"metadata": {"finalizers": ["x"], "resourceVersion": "41"}}]


async def test_removing_a_finalizer_from_an_object_already_gone_is_done() -> None:
    bodies, app = await _patched(404)
    async with serving(app) as port:
        client = KubeClient(kubernetes.client.Configuration(host=f"http://127.0.0.1:{port}"))
        try:
            await set_finalizer(client, PATH, RAYJOB, "ray.io/rayjob-finalizer", present=False)
            # Adding one to an object that is gone is an error: the caller must know.
            with pytest.raises(NotFound):
                await set_finalizer(client, PATH, RAYJOB, "y", present=True)
        finally:
            await client.close()
    assert len(bodies) == 2
