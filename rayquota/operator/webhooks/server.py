"""The HTTPS admission server (aiohttp): the queue integration's handlers behind one port.

The same server whatever the certificate (`settings.CertificateSource`): it waits until its
certificate is loaded, serves, and, for a generated certificate, registers the configurations
pointing the API server at it and removes them when it stops. Runs in the leader only (a
runnable), which is also the only Ready pod behind the chart's Service.

It serves on a thread of its own with its own event loop (`serving_thread.py`), so a review
never waits behind the reconciles. The handlers read the informers' caches from that thread
(`core/cache/store.py` keeps each read whole); the one API call they make, the LocalQueue lookup,
goes through a client of that loop's own (an aiohttp session belongs to one loop); an event
they record is handed to the operator's loop, whose recorder writes it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from rayquota.operator.core import Informer, Manager
from rayquota.operator.kube import UNREACHABLE, ApiError, KubeClient
from rayquota.operator.queue.gating.gate import QueueGate
from rayquota.operator.queue.objects import QueueObjects
from rayquota.operator.webhooks import pod_review, review
from rayquota.operator.webhooks.cert_keeper import ServingCertificate
from rayquota.operator.webhooks.configurations import TIMEOUT_SECONDS, LoopbackRegistration
from rayquota.operator.webhooks.serving_thread import ServingThread

log = logging.getLogger(__name__)

# A review that takes longer is logged (with its path and time): the API server gives up at
# TIMEOUT_SECONDS (the chart's webhooks.timeoutSeconds), and a slow one is the first sign.
SLOW_REVIEW_S = 1.0
# The longest a review waits for the API server (a LocalQueue not yet in the cache): well
# inside the API server's own timeout, so the review still answers, in doubt as if it existed.
LOOKUP_TIMEOUT_S = 2.0
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _timed(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every review timed; a slow one logged. The time counts from the request's first bytes
    being read: a review waiting for the CPU before that is not counted."""
    started = time.monotonic()
    try:
        return await handler(request)
    finally:
        took = time.monotonic() - started
        if took > SLOW_REVIEW_S:
            log.warning(
                "admission review %s took %.1fs (the API server waits %ds)",
                request.path,
                took,
                TIMEOUT_SECONDS,
            )


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


class WebhookServer:
    def __init__(
        self,
        manager: Manager,
        objects: QueueObjects,
        gate: QueueGate,
        *,
        bind: str,
        port: int,
        serving: ServingCertificate,
        registration: LoopbackRegistration | None = None,
        dispatched: review.Dispatched | None = None,
        allowed_security_fields: frozenset[str] = frozenset(),
    ) -> None:
        """`registration`: configurations this server registers for itself (loopback only).
        `allowed_security_fields`: gated RayCluster fields whose feature gate is on (accepted;
        the others are refused, naming the field)."""
        self.manager = manager
        self.objects = objects
        self.gate = gate
        self.bind = bind
        self.port = port
        self.serving = serving
        self.registration = registration
        self.dispatched = dispatched
        self.allowed_security_fields = allowed_security_fields
        # The LocalQueue cache (a queue label naming none is warned about at creation).
        self.local_queues: Informer = manager.informer(objects.api.local_queues, interned=True)
        # The LocalQueue lookup's client: same server and credentials, its session on the
        # serving thread's loop (closed there when the server stops).
        self.lookup_client: KubeClient = manager.client.clone()
        # The operator's loop, where the recorder writes events (set when the server runs).
        self._operator_loop: asyncio.AbstractEventLoop | None = None

    def application(self) -> web.Application:
        """The handlers, for the serving thread's loop (an application belongs to one loop)."""
        app = web.Application(middlewares=[_timed])
        app.add_routes(
            [
                web.post("/mutate-ray", self._mutate),
                web.post("/mutate-pod", self._mutate_pod),
                web.post("/validate-pod", self._validate_pod),
                web.post("/validate-ray", self._validate_ray),
                web.post("/validate-clusterqueue", self._validate_cluster_queue),
                # Also called as a mutating webhook: those answer before the CRD schema, so a
                # quota that is not a quantity is refused in words, not with the schema's regex.
                web.post("/mutate-clusterqueue", self._validate_cluster_queue),
                # A Cohort's quota, checked as a ClusterQueue's, served the same two ways.
                web.post("/validate-cohort", self._validate_cohort),
                web.post("/mutate-cohort", self._validate_cohort),
            ]
        )
        app.on_cleanup.append(self._close_lookup_client)
        return app

    async def _close_lookup_client(self, _app: web.Application) -> None:
        await self.lookup_client.close()

    def _post_event(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        """A Warning event about ``obj``, written by the recorder on the operator's loop (its
        queue is that loop's); posted directly when no server runs (a handler called alone)."""
        loop = self._operator_loop
        if loop is None:
            self.manager.recorder.post(obj, "Warning", reason, message)
        else:
            loop.call_soon_threadsafe(self.manager.recorder.post, obj, "Warning", reason, message)

    @property
    def url(self) -> str:
        return f"https://{self.bind}:{self.port}"

    def _ours(self, req: Mapping[str, Any]) -> bool:
        """Objects outside the namespaces this operator watches are another operator's business."""
        return self.manager.scope.admits(req.get("namespace") or None)

    async def _mutate(self, request: web.Request) -> web.Response:
        body = await request.json()
        req = body["request"]
        if not self._ours(req):
            return web.json_response(_response(req["uid"], review.ALLOW))
        kind, obj = req["kind"]["kind"], req["object"]
        if req.get("operation") == "UPDATE":
            verdict = review.carry_gate_over(kind, obj, req.get("oldObject") or {}, self.objects)
            return web.json_response(_response(req["uid"], verdict))
        queue = self.objects.queue_name(kind, obj)
        exists = queue is None or await self._local_queue_exists(str(req.get("namespace") or ""), queue)
        verdict = review.mutate(
            kind,
            obj,
            self.objects,
            self.dispatched,
            queue_exists=exists,
            allowed=self.allowed_security_fields,
        )
        return web.json_response(_response(req["uid"], verdict))

    async def _local_queue_exists(self, namespace: str, name: str) -> bool:
        """From the cache; a miss is asked of the API server (the LocalQueue may have been
        created a moment ago, in the same ``kubectl apply``). In doubt: it exists (no warning)."""
        resource = self.objects.api.local_queues
        if self.local_queues.store.get(namespace, name) is not None:
            return True
        try:
            # A list by name: the operator may list and watch LocalQueues, not get them. Bounded:
            # the client's own timeout and retries would outlast the API server's wait for us.
            found = await asyncio.wait_for(
                self.lookup_client.request(
                    "GET", resource.path(namespace), params={"fieldSelector": f"metadata.name={name}"}
                ),
                LOOKUP_TIMEOUT_S,
            )
            return bool(found.get("items"))
        except ApiError:
            return True
        except TimeoutError:
            log.warning(
                "LocalQueue %s/%s: not in the cache and the API server did not answer within %.0fs; "
                "taken to exist (no warning)",
                namespace,
                name,
                LOOKUP_TIMEOUT_S,
            )
            return True
        except UNREACHABLE:
            return True

    async def _mutate_pod(self, request: web.Request) -> web.Response:
        body = await request.json()
        req = body["request"]
        if not self._ours(req) or not self.objects.holds_pods:
            return web.json_response(_response(req["uid"], review.ALLOW))
        verdict = pod_review.hold_pod(req["object"], str(req.get("namespace") or ""), self.objects)
        return web.json_response(_response(req["uid"], verdict))

    async def _validate_pod(self, request: web.Request) -> web.Response:
        body = await request.json()
        req = body["request"]
        if not self._ours(req) or not self.objects.holds_pods or req.get("operation") != "UPDATE":
            return web.json_response(_response(req["uid"], review.ALLOW))
        old = req.get("oldObject") or {}
        namespace = str(req.get("namespace") or "")
        verdict = pod_review.keep_gate(req["object"], old, namespace, self.objects, self.gate)
        if not verdict.allowed:
            self._post_event(old, "QuotaGateProtected", verdict.message)
        return web.json_response(_response(req["uid"], verdict))

    async def _validate_ray(self, request: web.Request) -> web.Response:
        body = await request.json()
        req = body["request"]
        if not self._ours(req):
            return web.json_response(_response(req["uid"], review.ALLOW))
        verdict = review.validate_gate(
            req["kind"]["kind"],
            req["object"],
            req.get("oldObject"),
            self.objects,
            self.gate,
            allowed=self.allowed_security_fields,
        )
        if not verdict.allowed:
            self._post_event(req["oldObject"], "QuotaGateProtected", verdict.message)
        return web.json_response(_response(req["uid"], verdict))

    async def _validate_cluster_queue(self, request: web.Request) -> web.Response:
        body = await request.json()
        req = body["request"]
        return web.json_response(_response(req["uid"], review.validate_cluster_queue(req["object"])))

    async def _validate_cohort(self, request: web.Request) -> web.Response:
        body = await request.json()
        req = body["request"]
        return web.json_response(_response(req["uid"], review.validate_cohort(req["object"])))

    async def run(self) -> None:
        """Serve until cancelled (on the serving thread); a server that cannot listen, or whose
        thread ends, fails the operator."""
        await self.serving.loaded.wait()
        self._operator_loop = asyncio.get_running_loop()
        thread = ServingThread(
            self.application, bind=self.bind, port=self.port, serving=self.serving, name="admission-webhooks"
        )
        await thread.start()
        try:
            if self.registration is not None:
                await self.registration.register(self.url)
            log.info("admission webhooks on %s (on their own thread)", self.url)
            await thread.ended()
        finally:
            try:
                if self.registration is not None:
                    await self.registration.unregister()
            finally:
                await thread.stop()
