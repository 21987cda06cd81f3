"""How the dashboard is served (read by the operator's configuration too, so kept light)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

PORT_ENV = "RAYQUOTA_DASHBOARD_PORT"
BIND_ENV = "RAYQUOTA_DASHBOARD_BIND_ADDRESS"


@dataclass
class DashboardSettings:
    bind: str = "127.0.0.1"
    port: int = 8090
    allowed_origins: tuple[str, ...] = ()
    """Origins besides http://127.0.0.1:<port> and http://localhost:<port> (a port-forward or
    an ingress in front of the dashboard)."""
    history_interval_s: float = 15.0
    history_hours: float = 6.0
    history_resource: str = "nvidia.com/gpu"
    review_ttl_s: float = 30.0

    def origins(self, port: int) -> set[str]:
        local = {f"http://{host}:{port}" for host in ("127.0.0.1", "localhost", "[::1]")}
        return local | {o.rstrip("/") for o in self.allowed_origins}

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DashboardSettings | None:
        """``RAYQUOTA_DASHBOARD_PORT`` (and ``RAYQUOTA_DASHBOARD_BIND_ADDRESS``); None when unset."""
        env = os.environ if env is None else env
        raw = env.get(PORT_ENV, "").strip()
        if not raw:
            return None
        try:
            port = int(raw)
        except ValueError:
            raise ValueError(f"{PORT_ENV}={raw!r}: expected a port number") from None
        return cls(bind=env.get(BIND_ENV) or "127.0.0.1", port=port)
