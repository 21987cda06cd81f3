"""Where the pending-workloads API is served: decided once at start from the configuration's
``visibility`` section (``rayquota.config.build``), or by ``rayquota run`` for a local control
plane."""

from __future__ import annotations

from dataclasses import dataclass

from rayquota.operator.webhook_settings import LOOPBACK


@dataclass(frozen=True)
class VisibilitySettings:
    port: int
    """where it listens; 0: any free port (loopback only)"""
    bind: str = LOOPBACK
    loopback: bool = True
    """True: a throw-away certificate, and the Service and APIServices registered by the operator
    for an API server on this host; False: the chart's APIServices and Service name it."""
    cert_dir: str | None = None
    """the chart's mounted certificate (tls.crt, tls.key; cert-manager's); None: a throw-away one
    (the chart's APIServices then skip TLS verification, as Kueue's chart does without
    cert-manager)"""
