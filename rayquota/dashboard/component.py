"""The dashboard inside the operator process (``rayquota run --dashboard-port N``): the same
informers as the operator's controllers, so no second watch of anything they already watch."""

from __future__ import annotations

import os

from rayquota.dashboard.main import PORT_ENV, attach
from rayquota.dashboard.server import DashboardSettings
from rayquota.operator.config import OperatorConfig
from rayquota.operator.core import Manager


def setup(manager: Manager, config: OperatorConfig) -> None:
    raw = os.environ.get(PORT_ENV)
    if not raw:
        return
    try:
        port = int(raw)
    except ValueError:
        raise ValueError(f"{PORT_ENV}={raw!r}: expected a port number") from None
    bind = os.environ.get("RAYQUOTA_DASHBOARD_BIND_ADDRESS", "127.0.0.1")
    attach(manager, DashboardSettings(bind=bind, port=port))
