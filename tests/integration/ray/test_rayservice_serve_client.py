"""The Serve client against a real Ray head running Serve (no control plane needed)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from rayquota.operator.ray.dashboard_api.dashboard import RayDashboardClient
from rayquota.operator.ray.rayservice.serve_client import ServeClient, serve_config
from rayquota.operator.ray.rayservice.serve_status import ServeState
from tests.integration.ray.rayhead import RayHead
from tests.polling import wait_for_async

pytestmark = pytest.mark.ray

DEMO_APP = "rayquota.devtools.rayservice_demo_app:app"


def demo_config(*, fail: bool = False, message: str = "hello") -> str:
    return f"""
applications:
  - name: greeter
    route_prefix: /
    import_path: {DEMO_APP}
    args:
      message: {message}
      fail: {str(fail).lower()}
"""


@pytest.fixture
async def serve(ray_head: RayHead) -> AsyncIterator[ServeClient]:
    async with RayDashboardClient(ray_head.dashboard_url, timeout_s=30) as dashboard:
        client = ServeClient(dashboard)
        yield client
        await client.deploy({"applications": []})  # leave the head without applications


async def settled(
    client: ServeClient, predicate: Callable[[ServeState], bool], what: str, timeout_s: float = 120
) -> ServeState:
    """Poll Serve until the predicate holds (Serve deploys asynchronously)."""
    async def state_if_settled() -> ServeState | None:
        state = await client.state()
        return state if predicate(state) else None

    return await wait_for_async(what, state_if_settled, timeout_s, interval_s=0.5)


async def test_deploy_reports_running_applications_and_capacity(serve: ServeClient) -> None:
    await serve.deploy(serve_config(demo_config(), target_capacity=40))
    state = await settled(serve, lambda s: s.ready, "the greeter application RUNNING")
    assert set(state.applications) == {"greeter"}
    greeter = state.applications["greeter"]
    assert greeter["status"] == "RUNNING"
    assert greeter["serveDeploymentStatuses"]["Greeter"]["status"] == "HEALTHY"
    assert state.target_capacity == 40
    assert state.healthy_proxies >= 1
    assert state.failure is None

    # The same config without a capacity: Serve goes back to 100 % (reported as no target).
    await serve.deploy(serve_config(demo_config()))
    await settled(serve, lambda s: s.target_capacity is None and s.ready, "target_capacity cleared, RUNNING")


async def test_a_failing_application_is_reported_with_serves_reason(serve: ServeClient) -> None:
    await serve.deploy(serve_config(demo_config(fail=True)))
    state = await settled(serve, lambda s: s.failure is not None, "the greeter application failed")
    assert not state.ready
    assert state.applications["greeter"]["status"] == "DEPLOY_FAILED"
    assert "told to fail" in (state.failure or "")
