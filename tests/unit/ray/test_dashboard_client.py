"""The dashboard client against a fake dashboard on loopback: the shared connection pool, and
stop_job's answer for a job that has already finished."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psutil
import pytest
from aiohttp import web

from rayquota.operator.ray.dashboard_api.dashboard import DashboardClients
from tests.loopback_server import serving

MAX_PER_DASHBOARD = 3


@pytest.fixture
async def fake_dashboards() -> AsyncIterator[int]:
    """One HTTP server on loopback; every path prefix plays a different dashboard."""

    async def version(request: web.Request) -> web.Response:
        await asyncio.sleep(0.01)  # keeps requests in flight together, so the pool is exercised
        return web.json_response({"ray_version": "test", "head": request.match_info["head"]})

    async def job(request: web.Request) -> web.Response:
        return web.json_response({"submission_id": "done", "status": "STOPPED"})

    async def stop(request: web.Request) -> web.Response:
        # What Ray answers while the finished job's supervisor actor has not exited yet.
        return web.json_response({"stopped": True})

    app = web.Application()
    app.router.add_get("/{head}/api/version", version)
    app.router.add_get("/{head}/api/jobs/{job}", job)
    app.router.add_post("/{head}/api/jobs/{job}/stop", stop)
    async with serving(app) as port:
        yield port


def open_client_sockets(server_port: int) -> int:
    """Sockets this process holds open towards the server (its own accepted sockets excluded)."""
    return sum(
        1
        for conn in psutil.Process().net_connections(kind="tcp")
        if conn.raddr and conn.raddr.port == server_port and conn.status == psutil.CONN_ESTABLISHED
    )


async def test_many_dashboards_share_one_bounded_pool(fake_dashboards: int) -> None:
    clients = DashboardClients(max_connections=16, max_connections_per_dashboard=MAX_PER_DASHBOARD)
    try:
        # 150 RayJob attempts, each against a dashboard URL never seen before.
        urls = [f"127.0.0.1:{fake_dashboards}/attempt-{i}" for i in range(150)]
        answers = await asyncio.gather(*(clients.client(url).version() for url in urls))
        assert [a["head"] for a in answers] == [f"attempt-{i}" for i in range(150)]
        # A session per URL would leave one keep-alive socket per attempt open.
        assert 1 <= open_client_sockets(fake_dashboards) <= MAX_PER_DASHBOARD
        sessions = {id(clients.client(url)._get_session()) for url in urls}
        assert len(sessions) == 1
    finally:
        await clients.close()
    assert open_client_sockets(fake_dashboards) == 0


async def test_closed_pool_starts_a_new_session_on_next_use(fake_dashboards: int) -> None:
    clients = DashboardClients()
    first = clients.client(f"http://127.0.0.1:{fake_dashboards}/a")
    assert (await first.version())["head"] == "a"
    await clients.close()
    second = clients.client(f"127.0.0.1:{fake_dashboards}/b")
    try:
        assert (await second.version())["head"] == "b"
    finally:
        await clients.close()


async def test_stopping_a_finished_job_reports_nothing_stopped(fake_dashboards: int) -> None:
    clients = DashboardClients()
    try:
        assert await clients.client(f"127.0.0.1:{fake_dashboards}/head").stop_job("done") is False
    finally:
        await clients.close()
