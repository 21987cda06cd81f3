"""Serve calls a RayService makes on a cluster's dashboard, on dashboard.py's HTTP primitives.

``serveConfigV2`` is the user's YAML; Serve's REST API takes the same document as JSON. During an
incremental upgrade the operator adds ``target_capacity`` to it, so a deploy both applies the
applications and sets the capacity in one idempotent PUT (Serve leaves unchanged apps alone).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from rayquota.operator.ray.dashboard_api.dashboard import RayDashboardClient
from rayquota.operator.ray.rayservice.serve_status import ServeState, parse_serve_details

TARGET_CAPACITY_KEY = "target_capacity"


class InvalidServeConfig(ValueError):
    """serveConfigV2 is not a YAML mapping."""


def serve_config(serve_config_v2: str | None, target_capacity: int | None = None) -> dict[str, Any]:
    """The document to PUT: serveConfigV2 parsed, with the target capacity when one is set."""
    try:
        document = yaml.safe_load(serve_config_v2 or "") or {}
    except yaml.YAMLError as exc:
        raise InvalidServeConfig(f"serveConfigV2 is not valid YAML: {exc}") from exc
    if not isinstance(document, dict):
        raise InvalidServeConfig("serveConfigV2 must be a YAML mapping with an `applications` list")
    if target_capacity is not None:
        document[TARGET_CAPACITY_KEY] = target_capacity
    else:
        document.pop(TARGET_CAPACITY_KEY, None)
    return document


class ServeClient:
    def __init__(self, dashboard: RayDashboardClient) -> None:
        self.dashboard = dashboard

    async def state(self) -> ServeState:
        return parse_serve_details(await self.dashboard.get_serve_applications())

    async def deploy(self, config: Mapping[str, Any]) -> None:
        await self.dashboard.put_serve_applications(config)
