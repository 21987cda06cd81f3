"""The async Kubernetes client sends the credentials a kubeconfig names, and reads them (which may
run a token-refresh hook) off the event loop, once per interval rather than once per request."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from aiohttp import web

import rayquota
from rayquota.operator.kube import ApiError, AuthHeaders, KubeClient
from tests.loopback_server import serving


def _kubeconfig(tmp_path: Path, user: dict[str, str]) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


async def test_bearer_token_from_kubeconfig_is_sent(tmp_path: Path) -> None:
    client = KubeClient.from_environment(str(_kubeconfig(tmp_path, {"token": "abc.def"})))
    assert (await client._headers(None))["Authorization"] == "Bearer abc.def"


async def test_kubeconfig_without_token_sends_no_authorization(tmp_path: Path) -> None:
    client = KubeClient.from_environment(str(_kubeconfig(tmp_path, {"username": "x", "password": "y"})))
    headers = await client._headers("application/json")
    assert headers["Content-Type"] == "application/json"
    assert "Bearer" not in headers.get("Authorization", "")


class RefreshingToken:
    """A refresh hook like an exec plugin's: issues a new token on every call, notes the thread."""

    def __init__(self) -> None:
        self.calls = 0
        self.threads: set[str] = set()

    def __call__(self, configuration: kubernetes.client.Configuration) -> None:
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        configuration.api_key["authorization"] = f"token-{self.calls}"
        configuration.api_key_prefix["authorization"] = "Bearer"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _refreshing(clock: Clock) -> tuple[AuthHeaders, RefreshingToken]:
    hook = RefreshingToken()
    configuration = kubernetes.client.Configuration()
    configuration.api_key["authorization"] = "token-0"
    configuration.refresh_api_key_hook = hook
    return AuthHeaders(configuration, refresh_interval_s=60, clock=clock), hook


async def test_refresh_runs_once_per_interval_and_off_the_event_loop() -> None:
    clock = Clock()
    auth, hook = _refreshing(clock)
    many: list[Any] = await asyncio.gather(*(auth.get() for _ in range(50)))
    assert {headers["Authorization"] for headers in many} == {"Bearer token-1"}
    assert hook.calls == 1
    assert threading.current_thread().name not in hook.threads
    clock.now = 59.0
    assert (await auth.get())["Authorization"] == "Bearer token-1"
    clock.now = 60.0
    assert (await auth.get())["Authorization"] == "Bearer token-2"
    assert hook.calls == 2


async def test_a_refused_token_is_read_again_before_the_next_request() -> None:
    auth, hook = _refreshing(Clock())
    assert (await auth.get())["Authorization"] == "Bearer token-1"
    auth.expire()
    assert (await auth.get())["Authorization"] == "Bearer token-2"
    assert hook.calls == 2


async def test_client_reads_credentials_again_after_a_401() -> None:
    seen: list[str] = []

    async def namespaces(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        if len(seen) == 1:
            return web.json_response({"message": "Unauthorized"}, status=401)
        return web.json_response({"items": []})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces", namespaces)
    async with serving(app) as port:
        configuration = kubernetes.client.Configuration(host=f"http://127.0.0.1:{port}")
        configuration.refresh_api_key_hook = RefreshingToken()
        configuration.api_key["authorization"] = "token-0"
        client = KubeClient(configuration)
        try:
            with pytest.raises(ApiError):
                await client.list_items("/api/v1/namespaces")
            assert await client.list_items("/api/v1/namespaces") == []
        finally:
            await client.close()
    assert seen == ["Bearer token-1", "Bearer token-2"]


async def test_requests_name_the_operator_in_their_user_agent(tmp_path: Path) -> None:
    """The API server's audit log tells the operator's requests apart by user agent (the fault
    tests count them during a relist): `rayquota/<version>`, not aiohttp's default."""
    client = KubeClient.from_environment(str(_kubeconfig(tmp_path, {"token": "t"})))
    assert (await client._headers(None))["User-Agent"] == f"rayquota/{rayquota.__version__}"
