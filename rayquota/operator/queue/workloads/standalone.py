"""Workloads created with no owner (Kueue's perf runner, batch systems that write Workloads
themselves): their spec goes to the driver as soon as the watch brings it.

Kueue's queue manager takes a Workload from the watch, not from the reconcile; so does this.
Under a flood the Workload controller's reconciles run far behind the arrivals (each admission's
status write waits on a busy API server), and a workload the engine has not seen is neither
admitted nor counted pending in its ClusterQueue's status: Kueue's large-scale benchmark saw
the engine learn of a few thousand of its 50,000 Workloads while the runner created them, and
its recorder end the run with nothing admitted. Deletion, finishing and eviction stay with the
reconcile, which also submits whatever arrived before the engine was restored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rayquota.operator.core import ObjectKey
from rayquota.operator.core.cache.informer import DELETED
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.admission.admission_loop import AdmissionLoop
from rayquota.operator.queue.admission.workload_status import is_finished

log = logging.getLogger(__name__)


def has_no_owner_reference(workload: Obj) -> bool:
    """Written by something that is not a queued object's reconciler (no ownerReferences). A
    Workload with references whose owner is not cached is an orphan, not a standalone one."""
    return not workload["metadata"].get("ownerReferences")


class StandaloneSubmissions:
    def __init__(self, loop: AdmissionLoop, owner_of_workload: Callable[[ObjectKey], Any]) -> None:
        self.loop = loop
        self.owner_of_workload = owner_of_workload
        # The (uid, generation) last submitted per Workload: most events are status echoes.
        self._submitted: dict[str, tuple[Any, Any]] = {}

    def submit(self, engine_key: str, workload: Obj) -> bool:
        """Submits the spec when it changed (its generation), and wakes the engine only then.
        False: the spec cannot be read (logged)."""
        meta = workload["metadata"]
        version = (meta.get("uid"), meta.get("generation"))
        if self._submitted.get(engine_key) == version:
            return True
        try:
            self.loop.driver.submit(converter.workload(workload, self.loop.priority_of))
        except converter.ConversionError as exc:
            log.warning("%s: %s", engine_key, exc)
            return False
        self._submitted[engine_key] = version
        self.loop.request_cycle()
        return True

    def forget(self, engine_key: str) -> bool:
        """The Workload is done with; True when it had been submitted."""
        return self._submitted.pop(engine_key, None) is not None

    def on_change(self, event: str, workload: Obj, _old: Obj | None) -> None:
        """The Workload informer's callback."""
        if event == DELETED or not self.loop.restored.is_set():
            return
        meta = workload["metadata"]
        key = ObjectKey.of(workload)
        if self._submitted.get(str(key)) == (meta.get("uid"), meta.get("generation")):
            return  # most events: the echo of a status write, the spec as submitted
        if not has_no_owner_reference(workload) or meta.get("deletionTimestamp") or is_finished(workload):
            return
        if self.owner_of_workload(key) is None:
            self.submit(str(key), workload)
