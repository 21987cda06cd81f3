"""A null controller for Kueue's scheduler runner: the API server's delivery bound.

It admits every Workload with one status write as soon as the API server delivers it, with no
quota, no ordering and no preemption, and keeps each ClusterQueue's status (Active, pending,
reserving, usage) so that Kueue's recorder sees the run and ends it as it ends a real
controller's. Started by the runner in minimalkueue's place (``kueue_side_by_side.py
--controller null``), on the same API server in the same invocation as the controllers it
bounds: no controller can admit a Workload sooner than this one sees it and writes it, nor
finish the run before the runner has created, finished and recorded every Workload.

Its own cost is printed at exit (writes, CPU seconds) so that a bound set by this process
rather than by the server shows.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
USER_AGENT = "null-admitter"
MERGE_PATCH = "application/merge-patch+json"
WRITERS = 8  # status writes in flight
CQ_STATUS_PERIOD_S = 0.5  # a changed ClusterQueue's status is written at most this often


def milli(quantity: str | int | float) -> int:
    """A Kubernetes quantity in milli-units (the forms the runner writes: "1", "500m", "2Gi")."""
    text = str(quantity)
    suffixes = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix in sorted(suffixes, key=len, reverse=True):
        if text.endswith(suffix):
            return round(float(text[: -len(suffix)]) * suffixes[suffix] * 1000)
    return round(float(text) * 1000)


def admission_status(
    workload: Mapping[str, Any], cluster_queue: str, flavor: str, now: str
) -> dict[str, Any]:
    """The status patch that admits ``workload`` on ``flavor`` for every resource it asks for."""
    assignments = []
    for pod_set in workload["spec"].get("podSets") or ():
        count = int(pod_set.get("count") or 1)
        requests: dict[str, int] = {}
        for container in pod_set["template"]["spec"].get("containers") or ():
            for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
                requests[name] = requests.get(name, 0) + milli(value)
        assignments.append(
            {
                "name": pod_set["name"],
                "count": count,
                "flavors": {name: flavor for name in requests},
                "resourceUsage": {name: f"{m * count}m" for name, m in requests.items()},
            }
        )
    conditions = [
        {
            "type": kind,
            "status": "True",
            "reason": reason,
            "message": "null admitter",
            "lastTransitionTime": now,
        }
        for kind, reason in (("QuotaReserved", "QuotaReserved"), ("Admitted", "Admitted"))
    ]
    return {
        "status": {
            "admission": {"clusterQueue": cluster_queue, "podSetAssignments": assignments},
            "conditions": conditions,
        }
    }


def cpu_milli(admission_patch: Mapping[str, Any]) -> int:
    assignments = admission_patch["status"]["admission"]["podSetAssignments"]
    return sum(milli(a["resourceUsage"].get("cpu", "0")) for a in assignments)


@dataclass
class QueueTally:
    flavor: str
    pending: int = 0
    reserving: int = 0
    cpu_milli: int = 0
    dirty: bool = True

    def status(self, now: str) -> dict[str, Any]:
        usage = [
            {
                "name": self.flavor,
                "resources": [{"name": "cpu", "total": f"{self.cpu_milli}m", "borrowed": "0"}],
            }
        ]
        return {
            "status": {
                "pendingWorkloads": self.pending,
                "reservingWorkloads": self.reserving,
                "admittedWorkloads": self.reserving,
                "flavorsReservation": usage,
                "flavorsUsage": usage,
                "conditions": [
                    {
                        "type": "Active",
                        "status": "True",
                        "reason": "Ready",
                        "message": "null admitter",
                        "lastTransitionTime": now,
                    }
                ],
            }
        }


def _is_true(obj: Mapping[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or ()
    )


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class NullAdmitter:
    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self.api = api_client
        self.custom = client.CustomObjectsApi(api_client)
        self.pool = ThreadPoolExecutor(WRITERS, thread_name_prefix="write")
        self.queue_pool = ThreadPoolExecutor(2, thread_name_prefix="queue-status")
        self.lock = threading.Lock()
        self.queue_of_lq: dict[tuple[str, str], str] = {}
        self.tally: dict[str, QueueTally] = {}
        # uid -> (cluster queue, CPU milli, "pending" / "admitted" / "done")
        self.state: dict[str, tuple[str, int, str]] = {}
        self.writes = 0
        self.write_errors = 0
        self.stopping = threading.Event()

    # -- lookups (one read per LocalQueue and ClusterQueue, cached) --

    def cluster_queue(self, namespace: str, local_queue: str) -> str:
        key = (namespace, local_queue)
        if key not in self.queue_of_lq:
            lq = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, "localqueues", local_queue
            )
            self.queue_of_lq[key] = lq["spec"]["clusterQueue"]
        return self.queue_of_lq[key]

    def queue_tally(self, name: str) -> QueueTally:
        if name not in self.tally:
            cq = self.custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", name)
            flavor = cq["spec"]["resourceGroups"][0]["flavors"][0]["name"]
            with self.lock:
                self.tally.setdefault(name, QueueTally(flavor))
        return self.tally[name]

    # -- writes --

    def patch_status(self, namespace: str, plural: str, name: str, body: Mapping[str, Any]) -> None:
        """One merge patch of an object's status (a namespaced one when ``namespace`` is set)."""
        try:
            if namespace:
                self.custom.patch_namespaced_custom_object_status(
                    GROUP, VERSION, namespace, plural, name, body, _content_type=MERGE_PATCH
                )
            else:
                self.custom.patch_cluster_custom_object_status(
                    GROUP, VERSION, plural, name, body, _content_type=MERGE_PATCH
                )
            with self.lock:
                self.writes += 1
        except Exception as exc:  # a conflict-free merge patch fails only if the object is gone
            with self.lock:
                self.write_errors += 1
            print(f"null-admitter: {plural}/{name}: {str(exc)[:200]}", file=sys.stderr, flush=True)

    def admit(self, workload: Mapping[str, Any]) -> None:
        meta = workload["metadata"]
        try:
            cq = self.cluster_queue(meta["namespace"], workload["spec"]["queueName"])
            tally = self.queue_tally(cq)
        except Exception as exc:
            print(
                f"null-admitter: {meta['namespace']}/{meta['name']}: {str(exc)[:200]}",
                file=sys.stderr,
                flush=True,
            )
            return
        patch = admission_status(workload, cq, tally.flavor, _now())
        self.patch_status(meta["namespace"], "workloads", meta["name"], patch)
        with self.lock:
            phase = self.state.get(meta["uid"], ("", 0, ""))[2]
            tally.pending -= 1
            tally.dirty = True
            if phase == "pending":  # not already seen Finished (a runtime shorter than this write)
                self.state[meta["uid"]] = (cq, cpu_milli(patch), "admitted")
                tally.reserving += 1
                tally.cpu_milli += cpu_milli(patch)

    # -- the watch --

    def on_workload(self, obj: Mapping[str, Any]) -> None:
        uid = obj["metadata"]["uid"]
        with self.lock:
            known = self.state.get(uid)
        if known is None:
            if _is_true(obj, "Finished") or (obj.get("status") or {}).get("admission"):
                return
            with self.lock:
                self.state[uid] = ("", 0, "pending")
            self._count_pending_then_admit(obj)
        elif known[2] != "done" and _is_true(obj, "Finished"):
            with self.lock:
                self.state[uid] = (known[0], 0, "done")
                if known[2] == "admitted":
                    tally = self.tally[known[0]]
                    tally.reserving -= 1
                    tally.cpu_milli -= known[1]
                    tally.dirty = True

    def _count_pending_then_admit(self, obj: Mapping[str, Any]) -> None:
        """Counted pending on the watch's thread, as soon as seen: a backlog of admission
        writes shows in the ClusterQueue's pendingWorkloads."""
        try:
            tally = self.queue_tally(
                self.cluster_queue(obj["metadata"]["namespace"], obj["spec"]["queueName"])
            )
        except Exception as exc:
            print(f"null-admitter: {obj['metadata']['name']}: {str(exc)[:200]}", file=sys.stderr, flush=True)
            return
        with self.lock:
            tally.pending += 1
            tally.dirty = True
        self.pool.submit(self.admit, obj)

    def follow(self) -> None:
        from kubernetes import watch

        version = ""
        while not self.stopping.is_set():
            try:
                if not version:
                    listed = self.custom.list_cluster_custom_object(GROUP, VERSION, "workloads")
                    version = listed["metadata"]["resourceVersion"]
                    for item in listed.get("items") or ():
                        self.on_workload(item)
                for event in watch.Watch().stream(
                    self.custom.list_cluster_custom_object,
                    GROUP,
                    VERSION,
                    "workloads",
                    resource_version=version,
                    timeout_seconds=30,
                ):
                    obj = event["object"]
                    version = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.on_workload(obj)
            except Exception as exc:
                if "410" in str(exc):
                    version = ""
                time.sleep(0.2)

    def write_queue_statuses(self) -> None:
        while not self.stopping.wait(CQ_STATUS_PERIOD_S):
            with self.lock:
                due = [(name, t.status(_now())) for name, t in self.tally.items() if t.dirty]
                for name, _ in due:
                    self.tally[name].dirty = False
            for name, body in due:
                self.queue_pool.submit(self.patch_status, "", "clusterqueues", name, body)


def main() -> int:
    import signal

    from kubernetes import config

    api_client = config.new_client_from_config(config_file=os.environ["KUBECONFIG"])
    api_client.user_agent = USER_AGENT
    admitter = NullAdmitter(api_client)

    def stop(_signum: int, _frame: object) -> None:
        admitter.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    threading.Thread(target=admitter.follow, daemon=True, name="watch").start()
    threading.Thread(target=admitter.write_queue_statuses, daemon=True, name="queues").start()
    admitter.stopping.wait()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "null_admitter": {
                    "workloads": len(admitter.state),
                    "writes": admitter.writes,
                    "write_errors": admitter.write_errors,
                    "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
                }
            }
        ),
        file=sys.stderr,
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
