"""The tests use the package's local Ray head (see rayquota.operator.ray.localhead)."""

from __future__ import annotations

from rayquota.localcluster.ports import free_port
from rayquota.operator.ray.localhead import LocalRayHead as RayHead

__all__ = ["RayHead", "free_port"]
