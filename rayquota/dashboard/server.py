"""The dashboard's HTTP side (aiohttp): the static front end, the JSON pages, and the live
channel, a Server-Sent Events stream per open page.

Rules a platform team expects of it:
- every ``/api/`` request needs ``Authorization: Bearer <token>``: no token, or one the API
  server rejects (TokenReview), is a 401; answers hold only what the user may list
  (SubjectAccessReview per namespace, see :mod:`.access`);
- a request from a page of another origin is refused (``Origin``, ``Sec-Fetch-Site``); the
  token travels in a header, never a cookie, so a foreign page cannot borrow a session;
- only GET and HEAD exist: nothing here changes anything;
- every answer carries a Content-Security-Policy without inline scripts or styles, refuses
  framing, and is not cached.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from importlib import resources as package_files
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from yarl import URL

from rayquota.dashboard.access import AccessReviewer, User, Visibility
from rayquota.dashboard.cache import DashboardCache
from rayquota.dashboard.history import HistoryRing
from rayquota.dashboard.pages import PageError, Pages
from rayquota.dashboard.prometheus_history import PrometheusHistory
from rayquota.dashboard.queue_model import QueueModel
from rayquota.dashboard.settings import DashboardSettings
from rayquota.operator.kube import ApiError

log = logging.getLogger(__name__)

STATIC_DIR = Path(str(package_files.files("rayquota.dashboard") / "static"))
SPA_PATHS = (
    "/",
    "/cohorts",
    "/cohorts/",
    "/queues",
    "/queues/{tail:.*}",
    "/localqueues",
    "/localqueues/{tail:.*}",
    "/workloads",
    "/workloads/{tail:.*}",
    "/ray",
    "/ray/",
    "/history",
    "/history/",
    "/usage",
    "/usage/",
)
"""Every path the app routes (static/app.js ``ROUTES``), with and without a trailing slash,
answers with the app, so a reload, a new tab or a bookmark of any page opens it; tests check
each route both ways (tests/unit/dashboard/test_spa_routes.py, and in Chromium)."""
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
    "Cache-Control": "no-store",
}
LIVE_MIN_GAP_S = 0.25
"""Throttle of the live channel: at most four messages a second per page."""
KEEPALIVE_S = 15.0
SHUTDOWN_GRACE_S = 0.5
"""How long a stopping dashboard lets requests in flight finish (a page's JSON takes far less)."""
USER_KEY = web.RequestKey("user", User)


class Dashboard:
    def __init__(self, cache: DashboardCache, reviewer: AccessReviewer, settings: DashboardSettings) -> None:
        self.cache = cache
        self.reviewer = reviewer
        self.settings = settings
        self.model = QueueModel(cache)
        self.history = HistoryRing(
            settings.history_resource, settings.history_interval_s, settings.history_hours
        )
        self.prometheus = (
            PrometheusHistory(settings.prometheus_url, self.history) if settings.prometheus_url else None
        )
        self.pages = Pages(cache, self.model, self.history, self.prometheus)
        self.port = settings.port
        self.live_connections = 0

    # --- the application --------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._security_headers, self._same_origin, self._authenticate])
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/api/live", self._live)
        app.router.add_get("/api/{tail:.*}", self._api)
        for path in SPA_PATHS:
            app.router.add_get(path, self._index)
        app.router.add_static("/static/", STATIC_DIR, show_index=False, follow_symlinks=False)
        return app

    async def serve(self, ready: Callable[[int], None] | None = None) -> None:
        """Serve until cancelled; ``ready`` gets the bound port (0 in the settings: a free one)."""
        # Live streams never end on their own: waiting for them at shutdown (aiohttp's 60 s
        # grace) held the operator's stop, and its lease release, until a stream's next write.
        runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=SHUTDOWN_GRACE_S)
        await runner.setup()
        site = web.TCPSite(runner, self.settings.bind, self.settings.port, reuse_address=True)
        await site.start()
        server = site._server
        sockets: Iterable[Any] = getattr(server, "sockets", None) or []
        self.port = next((s.getsockname()[1] for s in sockets), self.settings.port)
        log.info("dashboard on http://%s:%d/", self.settings.bind, self.port)
        if ready is not None:
            ready(self.port)
        sampler = asyncio.create_task(self._sample_history())
        try:
            await asyncio.Event().wait()
        finally:
            sampler.cancel()
            await runner.cleanup()

    async def _sample_history(self) -> None:
        if self.prometheus is not None:
            async with aiohttp.ClientSession() as session:
                while True:
                    await self.prometheus.refresh(session)
                    await asyncio.sleep(self.history.interval_s)
        while True:
            self.history.record_snapshot(time.time(), self.model.snapshot())
            await asyncio.sleep(self.history.interval_s)

    # --- middlewares ------------------------------------------------------------------------------

    @web.middleware
    async def _security_headers(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            response = exc
        if not response.prepared:  # a live stream sent its headers when it started
            for name, value in SECURITY_HEADERS.items():
                response.headers.setdefault(name, value)
        if isinstance(response, web.HTTPException):
            raise response
        return response

    @web.middleware
    async def _same_origin(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path.startswith("/api/"):
            origin = request.headers.get("Origin")
            if origin is not None and origin.rstrip("/") not in self.settings.origins(self.port):
                raise _error(web.HTTPForbidden, f"origin {origin} is not allowed")
            if request.headers.get("Sec-Fetch-Site") in ("cross-site", "same-site"):
                raise _error(web.HTTPForbidden, "cross-site requests are not allowed")
        return await handler(request)

    @web.middleware
    async def _authenticate(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if not request.path.startswith("/api/"):
            return await handler(request)
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise _unauthorized("a bearer token is required (Authorization: Bearer <token>)")
        try:
            user = await self.reviewer.authenticate(token.strip())
        except ApiError as exc:
            log.warning("TokenReview failed: %s", exc)
            raise _error(web.HTTPServiceUnavailable, "the API server could not review the token") from exc
        if user is None:
            raise _unauthorized("the API server does not accept this token")
        request[USER_KEY] = user
        return await handler(request)

    # --- handlers ---------------------------------------------------------------------------------

    async def _healthz(self, _request: web.Request) -> web.Response:
        """Liveness, and what the dashboard costs: no data of any cluster object."""
        return web.json_response(
            {
                "ok": True,
                "snapshotSeconds": round(self.model.last_rebuild_s, 4),
                "liveConnections": self.live_connections,
            }
        )

    async def _index(self, _request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC_DIR / "index.html")

    async def answer(self, user: User, path: str, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """The page at ``path`` for ``user``: (HTTP status, body)."""
        try:
            route, request = self.pages.route(path, query)
            wanted = route.wanted(request)
            visibility = await self.reviewer.visibility(user, wanted) if wanted else Visibility(user, {})
            return 200, route.answer(request, visibility)
        except PageError as exc:
            return exc.status, {"error": exc.message}
        except ValueError as exc:
            return 400, {"error": str(exc)}
        except ApiError as exc:
            return 503, {"error": f"the API server could not review access: {exc.message}"}

    async def _api(self, request: web.Request) -> web.Response:
        status, body = await self.answer(request[USER_KEY], request.path, dict(request.query))
        if status == 200 and request.query.get("format") == "csv" and isinstance(body.get("csv"), str):
            name = f"rayquota-usage-by-{body.get('by')}.csv"
            return web.Response(
                text=body["csv"],
                content_type="text/csv",
                headers={"Content-Disposition": f'attachment; filename="{name}"'},
            )
        return web.json_response(body, status=status)

    async def _live(self, request: web.Request) -> web.StreamResponse:
        """``/api/live?view=/api/...``: the page's JSON now, then again whenever it changes."""
        view = request.query.get("view", "")
        if not view.startswith("/api/") or view.startswith("/api/live"):
            raise _error(web.HTTPBadRequest, f"view={view!r}: expected the path of a page under /api/")
        target = URL(view)
        user = request[USER_KEY]
        # The version the first answer reflects, read before computing it: a change that lands
        # while the stream is being set up must still bring a second message.
        seen = self.cache.changes.version
        status, body = await self.answer(user, target.path, dict(target.query))
        if self.model.behind():  # the rate bound held a snapshot back: look again soon
            seen = -1
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no", **SECURITY_HEADERS}
        )
        await response.prepare(request)
        self.live_connections += 1
        try:
            await self._stream(response, user, target, seen, (status, body))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.live_connections -= 1
        return response

    async def _stream(
        self,
        response: web.StreamResponse,
        user: User,
        target: URL,
        seen: int,
        first: tuple[int, dict[str, Any]],
    ) -> None:
        changes = self.cache.changes
        status, body = first
        last = ""
        while True:
            message = json.dumps({"status": status, "body": body}, separators=(",", ":"))
            if message != last:
                await response.write(f"event: view\ndata: {message}\n\n".encode())
                last = message
            sent_at = time.monotonic()
            # No change for a while: say so (proxies drop silent streams), and look again anyway,
            # since the History page moves with its samples rather than with the cache.
            if not await changes.wait_past(seen, min(KEEPALIVE_S, self.history.interval_s)):
                await response.write(b": keepalive\n\n")
            # Throttle: changes arriving within the gap are answered together.
            await asyncio.sleep(max(0.0, LIVE_MIN_GAP_S - (time.monotonic() - sent_at)))
            await asyncio.sleep(self.model.rebuild_due_in())
            seen = changes.version  # read before answering, as above
            self.model.snapshot()
            status, body = await self.answer(user, target.path, dict(target.query))
            if self.model.behind():
                seen = -1


def _error(kind: type[web.HTTPException], message: str) -> web.HTTPException:
    return kind(text=json.dumps({"error": message}), content_type="application/json")


def _unauthorized(message: str) -> web.HTTPException:
    error = _error(web.HTTPUnauthorized, message)
    error.headers["WWW-Authenticate"] = 'Bearer realm="rayquota-dashboard"'
    return error
