"""Watches for the RayJob flood: when each object of one kind is first seen meeting a condition
(created, admitted, Running), as this process saw its watch event.

Events are kept as plain JSON (the client's model classes are not built): on a 2-core machine
shared with the operator under test, decoding thousands of pods into objects would cost the
operator CPU time.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from benchmarks import harness

Body = Mapping[str, Any]
WATCH_WINDOW_S = 30


def always(_obj: Body) -> bool:
    return True


def pod_running(pod: Body) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def workload_admitted(workload: Body) -> bool:
    return bool((workload.get("status") or {}).get("admission"))


class FirstSeen(harness.Periodic):
    """Records, per object name, when it was first seen meeting `condition`, and its labels."""

    def __init__(
        self,
        kubeconfig: Path,
        namespace: str,
        *,
        group: str = "",
        version: str = "v1",
        plural: str,
        condition: Callable[[Body], bool] = always,
        label_selector: str = "",
    ) -> None:
        super().__init__(0, f"watch-{plural}")
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.group, self.version, self.plural = group, version, plural
        self.condition = condition
        self.label_selector = label_selector
        self.first_seen: dict[str, float] = {}  # name -> when first seen at all (its creation)
        self.first_met: dict[str, float] = {}
        self.gone: dict[str, float] = {}  # name -> when its DELETED event came
        self.labels: dict[str, dict[str, str]] = {}
        self._list: Callable[..., Any] | None = None
        # Each window resumes where the last one ended, so no DELETED event falls between two.
        self._version = ""

    def _lister(self) -> Callable[..., Any]:
        return harness.namespaced_lister(
            self.kubeconfig, self.group, self.version, self.namespace, self.plural
        )

    def tick(self) -> None:
        """One watch of up to WATCH_WINDOW_S, from the resourceVersion the last one reached (a
        fresh list first, and again if the server no longer has that version)."""
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        if self._list is None:
            self._list = self._lister()
        kwargs: dict[str, Any] = {"timeout_seconds": WATCH_WINDOW_S}
        if self.label_selector:
            kwargs["label_selector"] = self.label_selector
        if self._version:
            kwargs["resource_version"] = self._version
        try:
            for event in watch.Watch().stream(self._list, **kwargs):
                obj = event["raw_object"]
                meta = obj.get("metadata") or {}
                if event["type"] == "ERROR":
                    self._version = ""  # 410 Gone: list again
                    return
                self._version = str(meta.get("resourceVersion") or self._version)
                name = str(meta.get("name"))
                self.labels[name] = dict(meta.get("labels") or {})
                self.first_seen.setdefault(name, time.time())
                if event["type"] == "DELETED":
                    self.gone.setdefault(name, time.time())
                elif name not in self.first_met and self.condition(obj):
                    self.first_met[name] = time.time()
                if self.stopping:
                    return
        except ApiException as exc:
            if exc.status == 410:
                self._version = ""
                return
            raise

    def met(self) -> dict[str, float]:
        return dict(self.first_met)

    def grouped_by_label(self, label: str, members: int) -> dict[str, float]:
        """Label value -> when the last of its objects met the condition, only for values with
        at least `members` such objects (a Ray cluster whose every pod is Running)."""
        times: dict[str, list[float]] = defaultdict(list)
        for name, when in list(self.first_met.items()):
            value = self.labels.get(name, {}).get(label)
            if value:
                times[value].append(when)
        return {value: max(t) for value, t in times.items() if len(t) >= members}
