"""The MultiKueue AdmissionChecks: which checks are MultiKueue's, the config each names, and their
``Active`` condition (Kueue's reasons): Active while at least one of the config's workers is
connected (``SomeActiveClusters`` when not all are), inactive with ``BadConfig`` (the parameters
name no MultiKueueConfig that exists) or ``NoUsableClusters``. An inactive check makes its
ClusterQueues inactive: nothing is reserved there until a worker is back."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rayquota.api.multikueue_v1alpha1 import MULTIKUEUE_CONTROLLER
from rayquota.operator.core import Informer, Manager, ObjectKey, Result
from rayquota.operator.core.timestamps import now_rfc3339
from rayquota.operator.queue.kueue.api_group import QueueApi
from rayquota.operator.ray.vocabulary import conditions


class MultiKueueChecks:
    def __init__(
        self,
        manager: Manager,
        api: QueueApi,
        checks: Informer,
        configs: Informer,
        is_connected: Callable[[str], bool],
    ) -> None:
        self.manager = manager
        self.api = api
        self.checks = checks
        self.configs = configs
        self.is_connected = is_connected
        self.controller = manager.controller("multikueue-admission-checks", self.reconcile, workers=1)
        self.controller.watch(checks)
        self.controller.watch(configs, lambda _config: self.keys())

    def keys(self) -> list[ObjectKey]:
        return [ObjectKey("", name) for name in self.names()]

    def names(self) -> list[str]:
        """The AdmissionChecks handled by MultiKueue."""
        return [
            str(c["metadata"]["name"])
            for c in self.checks.store.list()
            if (c.get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER
        ]

    def refresh(self) -> None:
        for key in self.keys():
            self.controller.enqueue(key)

    def config_of(self, check_name: str) -> Mapping[str, Any] | None:
        """The MultiKueueConfig a MultiKueue check names, if it exists."""
        check = self.checks.store.get("", check_name)
        parameters = ((check or {}).get("spec") or {}).get("parameters") or {}
        if parameters.get("kind") != "MultiKueueConfig" or parameters.get("apiGroup") not in (
            None,
            "",
            self.api.multikueue_configs.group,
        ):
            return None
        return self.configs.store.get("", str(parameters.get("name") or ""))

    def clusters_of(self, check_name: str) -> list[str] | None:
        config = self.config_of(check_name)
        return None if config is None else [str(c) for c in (config.get("spec") or {}).get("clusters") or ()]

    async def reconcile(self, key: ObjectKey) -> Result | None:
        check = self.checks.store.get("", key.name)
        if check is None or (check.get("spec") or {}).get("controllerName") != MULTIKUEUE_CONTROLLER:
            return None
        active, reason, message = self._verdict(key.name)
        previous = dict(check.get("status") or {})
        conds = conditions.set_condition(
            list(previous.get("conditions") or []),
            "Active",
            active,
            reason,
            message,
            now=now_rfc3339(),
            observed_generation=check["metadata"].get("generation"),
        )
        await self.manager.status.write(self.api.admission_checks, check, {**previous, "conditions": conds})
        return None

    def _verdict(self, check_name: str) -> tuple[bool, str, str]:
        clusters = self.clusters_of(check_name)
        if clusters is None:
            return False, "BadConfig", "its parameters name no MultiKueueConfig that exists"
        inactive = [name for name in clusters if not self.is_connected(name)]
        if not inactive:
            return True, "Active", "The admission check is active"
        words = f"Inactive clusters: {inactive}"
        if len(inactive) < len(clusters):
            return True, "SomeActiveClusters", words
        return False, "NoUsableClusters", words
