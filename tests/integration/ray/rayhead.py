"""The tests' real Ray heads: the package's local Ray head (rayquota.operator.ray.localhead),
counted. A head is a raylet, a GCS, a dashboard and often a Serve controller: on a 2-core machine
more than two alive at once slow every test beside them, so starting a third fails the test that
asks for it (the suite's budget is a test too)."""

from __future__ import annotations

from typing import ClassVar

from rayquota.operator.ray.localhead import LocalRayHead
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
