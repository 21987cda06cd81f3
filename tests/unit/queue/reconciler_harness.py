"""The workload reconciler's eviction steps (``queued_steps.while_evicting``) without a cluster:
the real reconciler, driver, engine, status writer and check outcomes over an API server kept
in a dict. A reconcile here is what ``WorkloadReconciler._queued`` does for an object being
evicted: submit the cached Workload to the driver, feed its checks' states, then the step."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, cast

from rayquota.operator.core import Manager, ObjectKey
from rayquota.operator.core.status import StatusWriter
from rayquota.operator.kube import Conflict, KubeClient
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.admission import converter
from rayquota.operator.queue.admission.admission_loop import AdmissionLoop
from rayquota.operator.queue.admission.driver import Driver
from rayquota.operator.queue.dra.settings import DraSettings
from rayquota.operator.queue.kueue.api_group import RAYQUOTA
from rayquota.operator.queue.objects import Queued, QueueObjects
from rayquota.operator.queue.workloads.queued_steps import while_evicting
from rayquota.operator.queue.workloads.queued_view import QueuedView
from rayquota.operator.queue.workloads.workload_reconciler import WorkloadReconciler
from tests.unit.queue import bodies

NAMESPACE = "team-a"


class ApiServer:
    """Objects by path, each PUT giving a new resourceVersion; a PUT with an older one is a 409."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self._version = 0

    def put(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self._version += 1
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(self._version)
        self.objects[path] = stored
        return copy.deepcopy(stored)

    def get(self, path: str) -> dict[str, Any] | None:
        found = self.objects.get(path)
        return None if found is None else copy.deepcopy(found)

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        main = path.removesuffix("/status")
        stored = self.objects.get(main)
        sent = body["metadata"].get("resourceVersion")
        if stored is not None and sent and sent != stored["metadata"]["resourceVersion"]:
            raise Conflict("PUT", path, 409, f"resourceVersion {sent} is stale")
        if path.endswith("/status"):
            assert stored is not None, f"no object at {main}"
            return self.put(main, {**stored, "status": body["status"]})
        return self.put(main, body if stored is None else {**body, "status": stored.get("status")})

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386: null removes a key); no resourceVersion, no 409."""
        main = path.removesuffix("/status")
        return self.put(main, _merged(self.objects[main], body))


def _merged(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merged(out.get(key), value)
    return out


@dataclass
class Recorder:
    events: list[tuple[str, str, str, str]] = field(default_factory=list)
    """(object name, type, reason, message) as posted."""

    def post(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.append((str(obj["metadata"]["name"]), type_, reason, message))


class FakeManager:
    def __init__(self, server: ApiServer) -> None:
        self.client = cast(KubeClient, server)
        self.recorder = Recorder()
        self.status = StatusWriter(self.client)


class FakeObjects:
    """The informers' caches: the API server's objects as they are now."""

    api = RAYQUOTA

    def __init__(self, server: ApiServer) -> None:
        self.server = server
        self.settings = type("Settings", (), {"dra": DraSettings()})()

    def workload(self, key: ObjectKey) -> dict[str, Any] | None:
        return self.server.get(self.api.workloads.path(key.namespace, key.name))

    def owner_of_workload(self, key: ObjectKey) -> None:
        return None

    def redis_cleanup_pending(self, namespace: str, clusters: object) -> bool:
        return False


class FakeLoop:
    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.cycles_requested = 0

    def request_cycle(self) -> None:
        self.cycles_requested += 1

    def freed_quota_written(self, key: str) -> None:
        pass


@dataclass
class Harness:
    server: ApiServer
    manager: FakeManager
    reconciler: WorkloadReconciler

    def workload(self, name: str) -> dict[str, Any]:
        found = self.server.get(RAYQUOTA.workloads.path(NAMESPACE, name))
        assert found is not None, f"no Workload {NAMESPACE}/{name}"
        return found

    def create_workload(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.server.put(RAYQUOTA.workloads.path(NAMESPACE, body["metadata"]["name"]), body)

    def submit(self, name: str) -> None:
        """What every reconcile does first: the cached Workload goes to the driver, its checks too."""
        workload = self.workload(name)
        self.reconciler.driver.submit(converter.workload(workload))
        self.reconciler.checks.feed(f"{NAMESPACE}/{name}", workload)

    async def write_status(self, name: str) -> dict[str, Any]:
        stored = await self.reconciler.write_status(self.workload(name))
        assert stored is not None
        return stored

    async def reconcile_evicting(self, name: str, job: dict[str, Any]) -> None:
        """One reconcile of the RayJob ``job`` (no pod) whose Workload is being evicted."""
        self.submit(name)
        key = ObjectKey(NAMESPACE, name)
        assert self.reconciler.driver.is_evicting(str(key)), f"{key} is not being evicted"
        view = QueuedView(Queued("RayJob", job, ADAPTERS["RayJob"], key), [], {})
        await while_evicting(self.reconciler, key, view, self.workload(name))


def harness(driver: Driver) -> Harness:
    server = ApiServer()
    manager = FakeManager(server)
    reconciler = WorkloadReconciler(
        cast(Manager, manager), cast(QueueObjects, FakeObjects(server)), cast(AdmissionLoop, FakeLoop(driver))
    )
    return Harness(server, manager, reconciler)


def rayjob(server: ApiServer, name: str) -> dict[str, Any]:
    """A suspended RayJob, stored: the eviction's edits go to it."""
    job = bodies.rayjob(name)
    return server.put(f"/apis/ray.io/v1/namespaces/{NAMESPACE}/rayjobs/{name}", job)
