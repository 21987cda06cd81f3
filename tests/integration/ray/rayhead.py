"""The tests' real Ray heads: the package's local Ray head (rayquota.operator.ray.localhead),
counted. A head is a raylet, a GCS, a dashboard and often a Serve controller: on a 2-core machine
more than two alive at once slow every test beside them, so starting a third fails the test that
asks for it (the suite's budget is a test too)."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import ClassVar

from rayquota.operator.ray.localhead import LOOPBACK, LocalRayHead
from rayquota.ports import free_port

__all__ = ["MAX_ALIVE", "RayHead", "free_port"]

MAX_ALIVE = 2


class TooManyRayHeads(AssertionError):
    pass


class RayHead(LocalRayHead):
    """A local Ray head that counts the heads of this test process alive at once."""

    alive: ClassVar[set[int]] = set()
    most_alive: ClassVar[int] = 0

    def start(self, timeout_s: float = 120.0, attempts: int = 3) -> None:
        if id(self) not in RayHead.alive and len(RayHead.alive) >= MAX_ALIVE:
            raise TooManyRayHeads(
                f"a Ray head would be the {len(RayHead.alive) + 1}th alive at once (at most {MAX_ALIVE}): "
                "share the session's head (the ray_head fixture) or stop a head when its last test is done"
            )
        RayHead.alive.add(id(self))
        RayHead.most_alive = max(RayHead.most_alive, len(RayHead.alive))
        try:
            super().start(timeout_s, attempts)
        except BaseException:
            RayHead.alive.discard(id(self))
            raise

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            RayHead.alive.discard(id(self))

    def remove_serve_applications(self, timeout_s: float = 60.0) -> None:
        """Delete every Serve application (a declarative deploy of none, with the head's own HTTP
        options, so Serve keeps running on its port) and wait until the head lists none: the
        next test on a shared head starts as on a fresh one. Deployed again while a controller
        of the test is still stopping, they are deleted again."""
        body = {"http_options": {"host": LOOPBACK, "port": self.serve_port}, "applications": []}
        url = f"{self.dashboard_url}/api/serve/applications/"
        deadline = time.monotonic() + timeout_s
        while True:
            headers = {"Content-Type": "application/json"}
            request = urllib.request.Request(
                url, data=json.dumps(body).encode(), method="PUT", headers=headers
            )
            with urllib.request.urlopen(request, timeout=timeout_s):
                pass
            settle = time.monotonic() + 10.0
            while time.monotonic() < min(settle, deadline):
                with urllib.request.urlopen(url, timeout=timeout_s) as answer:
                    left = sorted(json.loads(answer.read()).get("applications") or {})
                if not left:
                    return
                time.sleep(0.5)
            if time.monotonic() >= deadline:
                raise AssertionError(f"Serve applications still listed after {timeout_s}s: {left}")
