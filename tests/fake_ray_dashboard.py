"""A stand-in for the Ray dashboards of kwok's fake clusters, on 127.0.0.1, for tests about
something else (control-plane faults, fuzzed input) that need RayJobs to run and RayServices to
become Ready without starting real Ray heads.

It answers what the operator asks a head: job submission and status (every job RUNNING until
the test says otherwise) and Serve's applications (whatever config was PUT last, every
application RUNNING, the proxy HEALTHY, the target capacity as asked). One server plays any
number of heads, each with its own state: ``url`` is head "", ``url_for("b")`` head "b" (a
dashboard map routes each cluster to one).
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class FakeHead:
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    serve_config: dict[str, Any] | None = None
    serve_puts: int = 0


class FakeRayDashboard:
    def __init__(self) -> None:
        self.heads: dict[str, FakeHead] = {}
        # A test may hold job stops: each one is counted when it arrives and answered only
        # once the test releases them (to keep the operator inside a stop across a fault).
        self.stops_asked = 0
        self._stops_released = threading.Event()
        self._stops_released.set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="fake-ray-dashboard", daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url_for(self, head: str) -> str:
        return f"{self.url}/h/{head}"

    def head(self, name: str = "") -> FakeHead:
        return self.heads.setdefault(name, FakeHead())

    def hold_stops(self) -> None:
        """Answer no job stop until :meth:`release_stops`."""
        self._stops_released.clear()

    def release_stops(self) -> None:
        self._stops_released.set()

    def _of(self, request: web.Request) -> FakeHead:
        return self.head(request.match_info.get("head", ""))

    # --- handlers ---------------------------------------------------------------------------

    async def _submit(self, request: web.Request) -> web.Response:
        body, jobs = await request.json(), self._of(request).jobs
        job_id = str(body.get("submission_id") or f"raysubmit_{len(jobs)}")
        if job_id in jobs:
            return web.Response(status=400, text=f"Job with submission_id {job_id} already exists.")
        jobs[job_id] = {
            "submission_id": job_id,
            "job_id": job_id,
            "status": "RUNNING",
            "entrypoint": body.get("entrypoint", ""),
            "start_time": int(time.time() * 1000),
            "metadata": body.get("metadata") or {},
        }
        return web.json_response({"submission_id": job_id, "job_id": job_id})

    async def _job(self, request: web.Request) -> web.Response:
        job = self._of(request).jobs.get(request.match_info["job"])
        return web.json_response(job) if job else web.Response(status=404, text="job not found")

    async def _jobs(self, request: web.Request) -> web.Response:
        return web.json_response(list(self._of(request).jobs.values()))

    async def _stop_job(self, request: web.Request) -> web.Response:
        job = self._of(request).jobs.get(request.match_info["job"])
        if job is None:
            return web.Response(status=404, text="job not found")
        self.stops_asked += 1
        while not self._stops_released.is_set():
            await asyncio.sleep(0.05)
        job.update(status="STOPPED", end_time=int(time.time() * 1000))
        return web.json_response({"stopped": True})

    async def _delete_job(self, request: web.Request) -> web.Response:
        deleted = self._of(request).jobs.pop(request.match_info["job"], None) is not None
        return web.json_response({"deleted": deleted})

    async def _logs(self, _request: web.Request) -> web.Response:
        return web.json_response({"logs": ""})

    async def _applications(self, request: web.Request) -> web.Response:
        config = self._of(request).serve_config or {}
        apps = {
            str(app.get("name") or "default"): {
                "status": "RUNNING",
                "message": "",
                "deployments": {"Greeter": {"status": "HEALTHY", "message": ""}},
            }
            for app in config.get("applications") or []
        }
        return web.json_response(
            {
                "applications": apps,
                "proxies": {"head": {"status": "HEALTHY"}},
                "target_capacity": config.get("target_capacity"),
            }
        )

    async def _put_applications(self, request: web.Request) -> web.Response:
        head = self._of(request)
        head.serve_config = dict(await request.json())
        head.serve_puts += 1
        return web.json_response({})

    async def _version(self, _request: web.Request) -> web.Response:
        return web.json_response({"version": "4", "ray_version": "2.41.0", "ray_commit": "fake"})

    # --- lifecycle --------------------------------------------------------------------------

    def _app(self) -> web.Application:
        app = web.Application()
        for prefix in ("", "/h/{head}"):
            app.router.add_post(f"{prefix}/api/jobs/", self._submit)
            app.router.add_get(f"{prefix}/api/jobs/", self._jobs)
            app.router.add_get(prefix + "/api/jobs/{job}", self._job)
            app.router.add_post(prefix + "/api/jobs/{job}/stop", self._stop_job)
            app.router.add_delete(prefix + "/api/jobs/{job}", self._delete_job)
            app.router.add_get(prefix + "/api/jobs/{job}/logs", self._logs)
            app.router.add_get(f"{prefix}/api/serve/applications/", self._applications)
            app.router.add_put(f"{prefix}/api/serve/applications/", self._put_applications)
            app.router.add_get(f"{prefix}/api/version", self._version)
        return app

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        runner = web.AppRunner(self._app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets
        self.port = int(server.sockets[0].getsockname()[1])
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await runner.cleanup()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    def start(self) -> FakeRayDashboard:
        self._thread.start()
        assert self._ready.wait(timeout=30), "the fake Ray dashboard did not start"
        return self

    def stop(self) -> None:
        self.release_stops()
        if self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=30)

    def __enter__(self) -> FakeRayDashboard:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
