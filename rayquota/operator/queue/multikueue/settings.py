"""The MultiKueue controller's settings (Kueue's ``multiKueue`` configuration), read from the
operator's environment. The controller runs only where it is switched on (the manager)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from rayquota.operator.queue.multikueue.kubeconfig_safety import DEFAULT_PATH_PREFIX

ENABLED_ENV = "RAYQUOTA_MULTIKUEUE"


class Dispatcher(StrEnum):
    ALL_AT_ONCE = "AllAtOnce"
    """Kueue's default: a copy in every connected worker, the first to admit wins."""
    MOST_FREE_QUOTA = "MostFreeQuota"
    """Ours: a copy only in the worker with the most free quota for the workload (how many more
    like it fit there); in every worker when none has room, or when the chosen one has not
    admitted within ``nomination_timeout_s``."""


@dataclass(frozen=True)
class MultiKueueSettings:
    # Kueue's defaults: a lost worker's workloads are requeued after 5 minutes, orphans in the
    # workers are collected every minute, and the copies' origin label says "multikueue".
    worker_lost_timeout_s: float = 300.0
    gc_interval_s: float = 60.0
    origin: str = "multikueue"
    dispatcher: Dispatcher = Dispatcher.ALL_AT_ONCE
    # Where the workers' kubeconfig Secrets are (the operator's own namespace).
    namespace: str = "rayquota-system"
    # How often a connected worker's API server is asked whether it answers, and how long an
    # answer may take before the worker counts as unreachable.
    probe_interval_s: float = 2.0
    probe_timeout_s: float = 5.0
    nomination_timeout_s: float = 60.0
    # Where ``locationType: Path`` kubeconfigs may be read from (Kueue's fixed folder).
    kubeconfig_path_prefix: str = DEFAULT_PATH_PREFIX

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> MultiKueueSettings | None:
        """None when the controller is off (``RAYQUOTA_MULTIKUEUE`` unset or false)."""
        switch = env.get(ENABLED_ENV, "").strip().lower()
        if switch in ("", "0", "false", "no", "off"):
            return None
        if switch not in ("1", "true", "yes", "on"):
            raise ValueError(f"{ENABLED_ENV}={env[ENABLED_ENV]!r}: expected true or false")
        defaults = cls()

        def seconds(name: str, default: float) -> float:
            raw = env.get(name)
            try:
                value = float(raw) if raw else default
            except ValueError as exc:
                raise ValueError(f"{name}={raw!r}: expected seconds") from exc
            if value <= 0:
                raise ValueError(f"{name}={raw!r}: expected a positive number of seconds")
            return value

        dispatcher = env.get("RAYQUOTA_MULTIKUEUE_DISPATCHER") or defaults.dispatcher.value
        try:
            chosen = Dispatcher(dispatcher)
        except ValueError as exc:
            names = ", ".join(d.value for d in Dispatcher)
            raise ValueError(
                f"RAYQUOTA_MULTIKUEUE_DISPATCHER={dispatcher!r}: expected one of {names}"
            ) from exc
        return cls(
            worker_lost_timeout_s=seconds(
                "RAYQUOTA_MULTIKUEUE_WORKER_LOST_TIMEOUT", defaults.worker_lost_timeout_s
            ),
            gc_interval_s=seconds("RAYQUOTA_MULTIKUEUE_GC_INTERVAL", defaults.gc_interval_s),
            origin=env.get("RAYQUOTA_MULTIKUEUE_ORIGIN") or defaults.origin,
            dispatcher=chosen,
            namespace=env.get("RAYQUOTA_MULTIKUEUE_NAMESPACE")
            or env.get("RAYQUOTA_OPERATOR_NAMESPACE")
            or defaults.namespace,
            probe_interval_s=seconds("RAYQUOTA_MULTIKUEUE_PROBE_INTERVAL", defaults.probe_interval_s),
            nomination_timeout_s=seconds(
                "RAYQUOTA_MULTIKUEUE_NOMINATION_TIMEOUT", defaults.nomination_timeout_s
            ),
            kubeconfig_path_prefix=env.get("RAYQUOTA_MULTIKUEUE_KUBECONFIG_PATH_PREFIX")
            or defaults.kubeconfig_path_prefix,
        )
