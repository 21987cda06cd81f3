"""The cluster's DNS, as the test process sees it: head Service names a test registers answer with
loopback, where its real Ray head listens.

On the local control plane the head pods are kwok fakes and no DNS server knows their Services.
An operator resolving dashboards by the head Service's name (``dashboard_resolver="service"``)
runs in the test's process (tests/operator_thread.py), so the system lookup it makes
(``socket.getaddrinfo``) is answered here while the fixture lives: a registered name resolves to
127.0.0.1, any other ``*.svc.*`` name is refused at once (as the cluster's DNS would refuse a
Service that does not exist), and every other name goes to the system resolver. The names asked
for are recorded, so a test can say which name the operator used.

Only this process is served: a Ray process started by the test resolves names itself (gRPC, in C)
and would not find these.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from rayquota.devtools.localhead import LOOPBACK

SERVICE_LABEL = ".svc."


class ClusterDNS:
    def __init__(self) -> None:
        self._names: set[str] = set()
        self._lock = threading.Lock()
        self.answered: list[str] = []
        self.refused: list[str] = []
        self._system = socket.getaddrinfo

    def register(self, name: str) -> None:
        """`name` resolves to loopback from now on."""
        with self._lock:
            self._names.add(name.lower())

    def getaddrinfo(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        """socket.getaddrinfo's signature and answers."""
        name = (host.decode() if isinstance(host, bytes) else str(host or "")).lower().rstrip(".")
        with self._lock:
            known = name in self._names
            if known:
                self.answered.append(name)
            elif SERVICE_LABEL in name:
                self.refused.append(name)
        if known:
            return self._system(LOOPBACK, port, *args, **kwargs)
        if SERVICE_LABEL in name:
            raise socket.gaierror(socket.EAI_NONAME, f"{name}: no such Service in the test's cluster DNS")
        return self._system(host, port, *args, **kwargs)

    def refused_in(self, namespace: str) -> list[str]:
        """The refused names of Services in `namespace` (``<service>.<namespace>.svc.<domain>``)."""
        with self._lock:
            return [n for n in self.refused if f".{namespace}{SERVICE_LABEL}" in f".{n}"]
