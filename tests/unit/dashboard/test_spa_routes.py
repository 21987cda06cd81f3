"""Every page of the dashboard opens by its address with and without a trailing slash: the
server answers it with the app (SPA_PATHS) and the app has a route for it (app.js ROUTES).
The browser test (tests/integration/dashboard/test_browser_routes.py) opens them in Chromium."""

from __future__ import annotations

import asyncio
import re

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from rayquota.dashboard.server import STATIC_DIR, Dashboard

PAGES = (
    "/",
    "/cohorts",
    "/queues",
    "/queues/team",
    "/localqueues",
    "/localqueues/ns/team",
    "/workloads",
    "/workloads/ns/rayjob-first-abcde",
    "/ray",
    "/history",
    "/usage",
)
ADDRESSES = sorted({*PAGES, *(f"{page}/" for page in PAGES if page != "/")})


def app_routes() -> list[re.Pattern[str]]:
    """The regular expressions of app.js's ROUTES (JavaScript's syntax here is Python's too)."""
    source = (STATIC_DIR / "app.js").read_text()
    block = source[source.index("const ROUTES = [") : source.index("];", source.index("const ROUTES = ["))]
    return [re.compile(literal) for literal in re.findall(r"^\s*\[/(\^.*?\$)/,", block, re.MULTILINE)]


def serves_the_app(path: str) -> bool:
    app = Dashboard.__new__(Dashboard).app()  # routing only: nothing the handlers need is made

    async def resolve() -> web.UrlMappingMatchInfo:
        return await app.router.resolve(make_mocked_request("GET", path, app=app))  # type: ignore[return-value]

    match = asyncio.run(resolve())
    return getattr(match.route.handler, "__func__", None) is Dashboard._index


def test_the_app_has_its_routes() -> None:
    assert len(app_routes()) == 8


@pytest.mark.parametrize("address", ADDRESSES)
def test_every_page_opens_with_and_without_a_trailing_slash(address: str) -> None:
    assert serves_the_app(address), f"the server does not answer {address} with the app"
    assert any(route.fullmatch(address) for route in app_routes()), f"app.js has no route for {address}"


@pytest.mark.parametrize("address", ["/ray/x", "/usage/x", "/history//", "/cohorts/x"])
def test_addresses_of_no_page_are_not_found(address: str) -> None:
    assert not serves_the_app(address)
    assert not any(route.fullmatch(address) for route in app_routes())
