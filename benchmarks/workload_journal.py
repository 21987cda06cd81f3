"""A journal of every Workload's transitions during a Kueue scheduler benchmark run, and what it
says about evictions: why each one happened (the Evicted / Preempted conditions' reasons) and
which class of workload took the quota from which.

Started before Kueue's runner (it waits for the kubeconfig the runner writes), stopped after; a
watch of Workloads (kueue.x-k8s.io/v1beta2) that resumes where it stopped, so no transition is
lost between windows. It costs the API server one more watch, on both sides alike.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import harness

USER_AGENT = f"{harness.POLLER_USER_AGENT}/journal"  # counted with the runner's side, not the controller's
CLASS_LABEL = "kueue.x-k8s.io/performance-scheduler-class"
_KEY = re.compile(r"[a-z0-9-]+/(?:small|medium|large)-[0-9-]+")  # rayquota: "(preempted by ns/name)"
_UID = re.compile(r"\(UID: ([0-9a-f-]{36})")  # Kueue: "Preempted to accommodate a workload (UID: ..."


@dataclass
class EvictionSummary:
    evictions: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)  # Evicted reason / Preempted reason
    by_classes: dict[str, int] = field(default_factory=dict)  # "victim class <- preemptor class"
    wasted_s: float = 0.0  # time the victims had held their admission when evicted, summed
    relists: int = 0
    watch_errors: list[str] = field(default_factory=list)


def _conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(c.get("type")): c for c in (obj.get("status") or {}).get("conditions") or ()}


def _true(conditions: Mapping[str, Mapping[str, Any]], kind: str) -> bool:
    return (conditions.get(kind) or {}).get("status") == "True"


class WorkloadJournal(harness.WorkloadFollower):
    user_agent = USER_AGENT

    def __init__(self, kubeconfig: Path, journal: Path) -> None:
        super().__init__(kubeconfig, "workload-journal")
        self.journal = journal
        self.entries: list[dict[str, Any]] = []
        self.summary = EvictionSummary()
        self._state: dict[str, tuple[Any, ...]] = {}
        self._klass: dict[str, str] = {}
        self._key_of_uid: dict[str, str] = {}
        self._admitted_at: dict[str, float] = {}
        self._pairs: Counter[str] = Counter()
        self._reasons: Counter[str] = Counter()

    def stop(self) -> EvictionSummary:
        self.stop_following()
        self.journal.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in self.entries))
        self.summary.by_reason = dict(self._reasons.most_common())
        self.summary.by_classes = dict(self._pairs.most_common())
        self.summary.wasted_s = round(self.summary.wasted_s, 1)
        self.summary.relists = self.relists
        self.summary.watch_errors = list(self.watch_errors)
        return self.summary

    def on_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        if kind != "DELETED":
            self.observe(obj)

    def observe(self, obj: Mapping[str, Any], now: float | None = None) -> None:
        """Note a Workload's state if it changed; count an eviction as Kueue's recorder does (each
        time Evicted turns True)."""
        now = time.time() if now is None else now
        meta = obj["metadata"]
        key = f"{meta.get('namespace')}/{meta['name']}"
        self._klass.setdefault(key, str((meta.get("labels") or {}).get(CLASS_LABEL) or "?"))
        self._key_of_uid.setdefault(str(meta.get("uid")), key)
        conditions = _conditions(obj)
        admission = (obj.get("status") or {}).get("admission") or {}
        evicted, preempted = conditions.get("Evicted") or {}, conditions.get("Preempted") or {}
        state = (
            admission.get("clusterQueue"),
            _true(conditions, "Admitted"),
            _true(conditions, "Evicted"),
            _true(conditions, "Finished"),
        )
        before = self._state.get(key)
        if state == before:
            return
        self._state[key] = state
        entry: dict[str, Any] = {"t": round(now, 3), "key": key, "cq": state[0], "admitted": state[1]}
        if state[1] and not (before and before[1]):
            self._admitted_at[key] = now
        if state[2] and not (before and before[2]):
            why = preempted.get("reason") if _true(conditions, "Preempted") else "-"
            reason = f"{evicted.get('reason')}/{why}"
            message = str(preempted.get("message") or evicted.get("message") or "")
            preemptors = [k for k in _KEY.findall(message) if k != key]
            preemptors += [self._key_of_uid[u] for u in _UID.findall(message) if u in self._key_of_uid]
            entry.update(evicted=reason, message=message[:300])
            self._reasons[reason] += 1
            by = (
                self._klass.get(preemptors[0], preemptors[0].split("/")[1].split("-")[0])
                if preemptors
                else "?"
            )
            self._pairs[f"{self._klass[key]} <- {by}"] += 1
            self.summary.evictions += 1
            if key in self._admitted_at:
                self.summary.wasted_s += now - self._admitted_at[key]
        if state[3]:
            entry["finished"] = True
        self.entries.append(entry)
