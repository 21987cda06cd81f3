"""Watches for the autoscaler benchmark: every event of one kind in one namespace, kept in arrival
order with the time.monotonic() it arrived at (the clock the node agent's Ray-node times use).

Events are kept as plain JSON, as benchmarks/flood_watch.py keeps them (no client model classes).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from benchmarks import harness
from benchmarks.autoscaler_timeline import Body, Seen, alive_worker_nodes, latest

WATCH_WINDOW_S = 10  # how long the block's end may wait for a watch to notice


class History(harness.Periodic):
    """Every event of ``plural`` in ``namespace`` while the ``with`` block runs (a fresh list
    first: its objects come as ADDED), each watch window resuming where the last one ended."""

    def __init__(
        self, kubeconfig: Path, namespace: str, *, group: str = "", version: str = "v1", plural: str
    ) -> None:
        super().__init__(0, f"history-{plural}")
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.group, self.version, self.plural = group, version, plural
        self._events: list[Seen] = []
        self._list: Callable[..., Any] | None = None
        self._version = ""

    def events(self) -> list[Seen]:
        """The events so far (a copy: the watch thread keeps appending)."""
        return list(self._events)

    def current(self) -> dict[str, Body]:
        """Each object's state as last seen, deleted ones left out."""
        return latest(self.events())

    def _lister(self) -> Callable[..., Any]:
        return harness.namespaced_lister(
            self.kubeconfig, self.group, self.version, self.namespace, self.plural
        )

    def tick(self) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        if self._list is None:
            self._list = self._lister()
        kwargs: dict[str, Any] = {"timeout_seconds": WATCH_WINDOW_S}
        if self._version:
            kwargs["resource_version"] = self._version
        try:
            for event in watch.Watch().stream(self._list, **kwargs):
                arrived = time.monotonic()
                obj = event["raw_object"]
                if event["type"] == "ERROR":
                    self._version = ""  # 410 Gone: list again
                    return
                self._version = str((obj.get("metadata") or {}).get("resourceVersion") or self._version)
                self._events.append(Seen(arrived, str(event["type"]), obj))
                if self.stopping:
                    return
        except ApiException as exc:
            if exc.status == 410:
                self._version = ""
                return
            raise


class RayNodes(harness.Periodic):
    """When each Ray worker node was first seen ALIVE, by node id, polled every ``interval_s``
    while the ``with`` block runs from the head's state API (``/api/v0/nodes``, which asks the
    GCS; the dashboard's own node list, which the node agent reads, lagged the GCS by up to a
    second: nodes were listed after their task had answered)."""

    def __init__(self, alive: Callable[[], Iterable[str]], interval_s: float = 0.1) -> None:
        super().__init__(interval_s, "ray-nodes")
        self.alive = alive
        self.joined: dict[str, float] = {}

    def tick(self) -> None:
        try:
            ids = list(self.alive())
        except OSError:  # the dashboard busy or restarting: asked again next time
            return
        seen = time.monotonic()
        for node in ids:
            self.joined.setdefault(node, seen)

    def first_new(self, known: Iterable[str]) -> float | None:
        """When the first node not in ``known`` was seen, if one was."""
        old = set(known)
        fresh = [t for node, t in self.joined.copy().items() if node not in old]
        return min(fresh, default=None)


def alive_workers(dashboard_url: str) -> list[str]:
    """The head's ALIVE worker nodes, from its state API."""
    url = f"{dashboard_url}/api/v0/nodes?limit=1000&timeout=5"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return alive_worker_nodes(json.loads(answer.read()))
