"""The tests use the package's local Ray head (see rayquota.operator.ray.localhead)."""

from __future__ import annotations

from rayquota.operator.ray.localhead import LocalRayHead as RayHead
from rayquota.ports import free_port

__all__ = ["RayHead", "free_port"]
