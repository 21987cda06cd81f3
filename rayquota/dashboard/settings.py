"""How the dashboard is served: built by `rayquota.config` from the `dashboard` section (kept light)."""

from __future__ import annotations

from dataclasses import dataclass


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
