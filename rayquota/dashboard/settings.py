"""How the dashboard is served (read by the operator's configuration too, so kept light)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

PORT_ENV = "RAYQUOTA_DASHBOARD_PORT"
BIND_ENV = "RAYQUOTA_DASHBOARD_BIND_ADDRESS"
ORIGINS_ENV = "RAYQUOTA_DASHBOARD_ALLOWED_ORIGINS"
PROMETHEUS_ENV = "RAYQUOTA_DASHBOARD_PROMETHEUS_URL"


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
    prometheus_url: str | None = None
    """The History page's source when set: a Prometheus that scrapes the operator's /metrics."""

    def origins(self, port: int) -> set[str]:
        local = {f"http://{host}:{port}" for host in ("127.0.0.1", "localhost", "[::1]")}
        return local | {o.rstrip("/") for o in self.allowed_origins}

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DashboardSettings | None:
        """``RAYQUOTA_DASHBOARD_PORT`` (and ``..._BIND_ADDRESS``, ``..._ALLOWED_ORIGINS``, a comma
        list, ``..._PROMETHEUS_URL``); None when the port is unset."""
        env = os.environ if env is None else env
        raw = env.get(PORT_ENV, "").strip()
        if not raw:
            return None
        try:
            port = int(raw)
        except ValueError:
            raise ValueError(f"{PORT_ENV}={raw!r}: expected a port number") from None
        origins = tuple(o.strip() for o in env.get(ORIGINS_ENV, "").split(",") if o.strip())
        return cls(
            bind=env.get(BIND_ENV) or "127.0.0.1",
            port=port,
            allowed_origins=origins,
            prometheus_url=checked_prometheus_url(env.get(PROMETHEUS_ENV), PROMETHEUS_ENV),
        )


def checked_prometheus_url(raw: str | None, where: str) -> str | None:
    """An http(s) base URL (trailing slash dropped), None when empty; else a clear error."""
    url = (raw or "").strip().rstrip("/")
    if not url:
        return None
    if not url.startswith(("http://", "https://")) or "?" in url or "#" in url:
        raise ValueError(
            f"{where}={raw!r}: expected the base URL of a Prometheus, e.g. http://prometheus:9090"
        )
    return url
