"""The HTTPS admission server (aiohttp) and the webhook configurations pointing at it.

The configurations name ``https://127.0.0.1:PORT/...`` with the CA in ``caBundle``: right for
the local control plane, whose API server runs on the same host. ``failurePolicy: Ignore``
and object selectors on the queue labels keep a down operator from blocking anything.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from rayquota.operator.core import Manager
from rayquota.operator.core.resources import Resource
from rayquota.operator.kube import ApiError, NotFound
from rayquota.operator.queue.gate import QueueGate
from rayquota.operator.queue.objects import QueueObjects
from rayquota.operator.ray import labels
from rayquota.operator.webhooks import review
from rayquota.operator.webhooks.certs import serving_cert

log = logging.getLogger(__name__)

MUTATING = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)
VALIDATING = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
CONFIG_NAME = "rayquota-queue"
RAY_KINDS = ("rayjobs", "rayclusters", "rayservices")


def _response(uid: str, verdict: review.Verdict) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": verdict.message}
    if verdict.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(list(verdict.patch)).encode()).decode()
    if verdict.warning:
        response["warnings"] = [verdict.warning]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _rule(group: str, plurals: tuple[str, ...], operations: list[str]) -> dict[str, Any]:
    return {
        "apiGroups": [group],
        "apiVersions": ["*"],
        "resources": list(plurals),
        "operations": operations,
        "scope": "*",
    }


def webhook_configurations(
    url: str, ca_bundle: str, queue_label_keys: tuple[str, ...]
) -> tuple[dict[str, Any], ...]:
    """One webhook per queue label key (a selector cannot OR two keys), plus one for the
    children of RayJobs and RayServices, which may not carry the label."""

    def hook(
        name: str, path: str, rules: list[dict[str, Any]], selector: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": name,
            "clientConfig": {"url": f"{url}{path}", "caBundle": ca_bundle},
            "rules": rules,
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 5,
        }
        if selector is not None:
            out["objectSelector"] = selector
        return out

    labelled: list[Mapping[str, Any]] = [
        {"matchExpressions": [{"key": key, "operator": "Exists"}]} for key in queue_label_keys
    ]
    children: Mapping[str, Any] = {
        "matchExpressions": [
            {"key": labels.ORIGINATED_FROM_CRD, "operator": "In", "values": ["RayJob", "RayService"]}
        ]
    }
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": CONFIG_NAME},
        "webhooks": [
            hook(
                f"born-suspended-{i}.queue.rayquota.io",
                "/mutate-ray",
                [_rule("ray.io", RAY_KINDS, ["CREATE"])],
                sel,
            )
            for i, sel in enumerate(labelled)
        ],
    }
    gate_hooks = [
        hook(f"gate-{i}.queue.rayquota.io", "/validate-ray", [_rule("ray.io", RAY_KINDS, ["UPDATE"])], sel)
        for i, sel in enumerate([*labelled, children])
    ]
    queue_hook = hook(
        "clusterqueue.queue.rayquota.io",
        "/validate-clusterqueue",
        [_rule("rayquota.io", ("clusterqueues",), ["CREATE", "UPDATE"])],
        None,
    )
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIG_NAME},
        "webhooks": [*gate_hooks, queue_hook],
    }
    return mutating, validating


class WebhookServer:
    def __init__(
        self, manager: Manager, objects: QueueObjects, gate: QueueGate, port: int, bind: str = "127.0.0.1"
    ) -> None:
        self.manager = manager
        self.objects = objects
        self.gate = gate
        self.port = port
        self.bind = bind
        self.app = web.Application()
        self.app.add_routes(
            [
                web.post("/mutate-ray", self._mutate),
                web.post("/validate-ray", self._validate_ray),
                web.post("/validate-clusterqueue", self._validate_cluster_queue),
            ]
        )

    def _ours(self, req: Mapping[str, Any]) -> bool:
        """Objects outside the namespaces this operator watches are another operator's business."""
        return self.manager.scope.admits(req.get("namespace") or None)

    async def _mutate(self, request: web.Request) -> web.Response:
        body = await request.json()
        req = body["request"]
        if not self._ours(req):
            return web.json_response(_response(req["uid"], review.ALLOW))
        verdict = review.mutate(req["kind"]["kind"], req["object"], self.objects)
        return web.json_response(_response(req["uid"], verdict))

    async def _validate_ray(self, request: web.Request) -> web.Response:
        body = await request.json()
        req = body["request"]
        if not self._ours(req):
            return web.json_response(_response(req["uid"], review.ALLOW))
        verdict = review.validate_ray(
            req["kind"]["kind"], req["object"], req.get("oldObject"), self.objects, self.gate
        )
        if not verdict.allowed:
            self.manager.recorder.post(req["oldObject"], "Warning", "QuotaGateProtected", verdict.message)
        return web.json_response(_response(req["uid"], verdict))

    async def _validate_cluster_queue(self, request: web.Request) -> web.Response:
        body = await request.json()
        req = body["request"]
        return web.json_response(_response(req["uid"], review.validate_cluster_queue(req["object"])))

    async def run(self) -> None:
        cert = serving_cert(self.bind)
        runner = web.AppRunner(self.app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.bind, self.port, ssl_context=cert.context)
        await site.start()
        url = f"https://{self.bind}:{self.port}"
        try:
            for config, resource in zip(
                webhook_configurations(url, cert.ca_bundle, tuple(self.objects.settings.queue_label_keys)),
                (MUTATING, VALIDATING),
                strict=True,
            ):
                await self._register(resource, config)
            log.info("admission webhooks on %s", url)
            await asyncio.Event().wait()  # serve until cancelled
        finally:
            await self._unregister()
            await runner.cleanup()

    async def _register(self, resource: Resource, config: dict[str, Any]) -> None:
        existing = await self.manager.client.get(resource.path(name=CONFIG_NAME))
        if existing is None:
            await self.manager.client.create(resource.path(), config)
            return
        config["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        await self.manager.client.replace(resource.path(name=CONFIG_NAME), config)

    async def _unregister(self) -> None:
        for resource in (MUTATING, VALIDATING):
            try:
                await self.manager.client.delete(resource.path(name=CONFIG_NAME))
            except (ApiError, NotFound) as exc:
                log.debug("webhook configuration not deleted: %s", exc)
