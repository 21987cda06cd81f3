"""What the operator core promises, observed on the real API server: quiet objects at rest,
exact status writes, bounded events under failure, finalizers only where needed."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.operator.config import OperatorConfig
from tests.integration.ray.kubehelpers import Kube, running, wait_for
from tests.integration.ray.test_rayjob import (
    job_state,
    ray,
    rayjob,
    rayjob_on_shared_cluster,
    wait_deployment,
)
from tests.polling import holds

SAMPLE = Path(__file__).resolve().parents[3] / "samples" / "quickstart" / "raycluster.yaml"


def sample(name: str, **spec: Any) -> dict[str, Any]:
    body = copy.deepcopy(yaml.safe_load(SAMPLE.read_text()))
    body["metadata"]["name"] = name
    body["spec"].update(spec)
    return dict(body)


@pytest.fixture
def kube(control_plane: Any, namespace: str, ray_operator: OperatorConfig) -> Kube:
    return Kube(control_plane, namespace)


def test_a_suspended_cluster_at_rest_is_never_rewritten(kube: Kube) -> None:
    kube.apply(sample("quiet", suspend=True))
    cluster = wait_for(
        "suspended",
        lambda: (
            (c := kube.get("raycluster", "quiet")) and c.get("status", {}).get("state") == "suspended" and c
        ),
    )
    assert not cluster["metadata"].get("finalizers"), "RayClusters get no finalizer"
    version = cluster["metadata"]["resourceVersion"]
    # A window, not a synchronisation: nothing may happen in it. The old operator rewrote a
    # suspended cluster's status every second.
    holds(
        "the cluster unwritten",
        lambda: kube.get("raycluster", "quiet")["metadata"]["resourceVersion"] == version,
        seconds=8,
        interval_s=1,
    )
    assert kube.pods("quiet") == []


def test_removed_status_keys_disappear(kube: Kube) -> None:
    kube.apply(sample("exact"))
    wait_for(
        "head pod in status",
        lambda: ((kube.get("raycluster", "exact") or {}).get("status") or {}).get("head", {}).get("podIP"),
    )
    kube.patch("raycluster", "exact", {"spec": {"suspend": True}})
    status = wait_for(
        "suspended",
        lambda: (
            (s := (kube.get("raycluster", "exact") or {}).get("status") or {}).get("state") == "suspended"
            and s
        ),
    )
    # A merge patch would have kept the deleted head pod's name and IP for ever.
    assert "podName" not in status["head"] and "podIP" not in status["head"]


def test_state_stays_ready_while_scaling(kube: Kube) -> None:
    kube.apply(sample("steady"))
    wait_for(
        "ready",
        lambda: ((kube.get("raycluster", "steady") or {}).get("status") or {}).get("state") == "ready",
    )
    group = copy.deepcopy(sample("steady")["spec"]["workerGroupSpecs"][0])
    group["replicas"] = 4
    kube.patch("raycluster", "steady", {"spec": {"workerGroupSpecs": [group]}})
    states = set()

    def scaled() -> bool:
        cluster = kube.get("raycluster", "steady") or {}
        states.add((cluster.get("status") or {}).get("state"))
        return (
            len(
                running(
                    [
                        p
                        for p in kube.pods("steady")
                        if p["metadata"]["labels"]["ray.io/node-type"] == "worker"
                    ]
                )
            )
            == 4
        )

    wait_for("scaled to 4 workers", scaled)
    assert states == {"ready"}, f"state flapped while scaling: {states}"


# KubeRay v1.6.2 (its operator run for real beside the same ResourceQuota: BENCHMARKS.md, "Events
# under a failure loop") posts, in the first 30 s, one Event object per Created* event (head
# Service, head pod, the one worker the quota admits) and, its failure messages naming a new
# generated pod each time, nine separate FailedToCreateWorkerPod Events and one combined.
KUBERAY_EVENT_OBJECTS_IN_30_S = 13


def test_a_failure_loop_posts_no_more_event_objects_than_kuberay(kube: Kube) -> None:
    """A ResourceQuota refuses most pods: the operator retries with backoff, and the events are
    correlated as client-go correlates KubeRay's (the operator used to post 16 Event objects in
    30 s here)."""
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "two-pods"},
            "spec": {"hard": {"pods": "2"}},
        }
    )
    wait_for(
        "quota status", lambda: (kube.get("resourcequota", "two-pods") or {}).get("status", {}).get("hard")
    )
    body = sample("blocked")
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 4
    started = time.monotonic()
    kube.apply(body)
    wait_for(
        "failure events",
        lambda: any(e["reason"] == "FailedToCreateWorkerPod" for e in kube.events("blocked")),
    )
    wait_for("30 s of the failure loop", lambda: time.monotonic() - started > 30, timeout_s=40)
    events = kube.events("blocked")
    summary = sorted((e["reason"], int(e.get("count") or 1), e["message"][:60]) for e in events)
    assert len(events) <= KUBERAY_EVENT_OBJECTS_IN_30_S, summary
    failures = [e for e in events if e["reason"] == "FailedToCreateWorkerPod"]
    combined = [e for e in failures if e["message"].startswith("(combined from similar events): ")]
    # client-go's aggregation: nine different messages each, then one combined Event that counts.
    assert len(failures) == 10 and len(combined) == 1, summary
    assert combined[0]["count"] >= 2, "retries continued, counted on the combined Event"
    assert all(e["type"] == "Warning" for e in failures)
    cluster = kube.get("raycluster", "blocked")
    failure = [c for c in cluster["status"]["conditions"] if c["type"] == "ReplicaFailure"]
    assert failure and failure[0]["status"] == "True" and "forbidden" in failure[0]["message"]


def test_rayjob_finalizer_only_while_a_ray_job_may_run(kube: Kube, local_dashboard: str) -> None:
    kube.apply(rayjob("held", "python -c 'print(1)'", suspend=True, shutdownAfterJobFinishes=True))
    wait_deployment(kube, "held", {"Suspended"})
    assert not kube.get("rayjob", "held")["metadata"].get("finalizers")

    kube.apply(rayjob("runs", "python -c 'import time; time.sleep(600)'", submissionMode="HTTPMode"))
    wait_for("running", lambda: job_state(kube, "runs").get("jobStatus") == "RUNNING")
    assert kube.get("rayjob", "runs")["metadata"]["finalizers"] == ["ray.io/rayjob-finalizer"]


def test_deletion_gives_up_on_an_unreachable_dashboard_after_a_bounded_time(
    kube: Kube, local_dashboard: str, ray_operator: OperatorConfig
) -> None:
    """On a shared cluster (clusterSelector) nothing else ends the Ray job: the stop is retried,
    then the RayJob is released after the bounded time."""
    kube.apply(rayjob_on_shared_cluster(kube, "orphan", "python -c 'import time; time.sleep(600)'"))
    status = wait_for("running", lambda: (s := job_state(kube, "orphan")).get("jobStatus") == "RUNNING" and s)
    # The dashboard recorded in the status becomes unreachable.
    kube.patch_status("rayjob", "orphan", {"status": {"dashboardURL": "127.0.0.1:9"}})
    wait_for("dashboard URL changed", lambda: job_state(kube, "orphan").get("dashboardURL") == "127.0.0.1:9")
    kube.kubectl("delete", "rayjob", "orphan", "--wait=false")
    wait_for(
        "a warning that stopping failed",
        lambda: any(e["reason"] == "FailedToStopRayJob" for e in kube.events("orphan")),
    )
    assert kube.get("rayjob", "orphan") is not None, "held while the stop is retried"
    wait_for(
        "released",
        lambda: kube.get("rayjob", "orphan") is None,
        timeout_s=ray_operator.rayjob_stop_timeout_s + 60,
    )
    kube.reasons_once("orphan", {"GaveUpStoppingRayJob"})
    # Clean up the Ray job the test left running on the shared head.
    ray(local_dashboard, lambda c: c.stop_job(status["jobId"]))


def test_deleting_a_rayjob_with_its_own_cluster_is_not_held_by_a_dead_dashboard(
    kube: Kube, local_dashboard: str
) -> None:
    """A RayJob's own cluster is deleted with it, which ends the Ray job: a failed stop is reported
    and the RayJob released at once, never held for the whole stop timeout."""
    kube.apply(rayjob("owned", "python -c 'import time; time.sleep(600)'", submissionMode="HTTPMode"))
    status = wait_for("running", lambda: (s := job_state(kube, "owned")).get("jobStatus") == "RUNNING" and s)
    kube.patch_status("rayjob", "owned", {"status": {"dashboardURL": "127.0.0.1:9"}})
    wait_for("dashboard URL changed", lambda: job_state(kube, "owned").get("dashboardURL") == "127.0.0.1:9")
    kube.kubectl("delete", "rayjob", "owned", "--wait=false")
    wait_for("released", lambda: kube.get("rayjob", "owned") is None, timeout_s=30)
    events = kube.events_once("owned", lambda es: any(e["reason"] == "FailedToStopRayJob" for e in es))
    failed = [e for e in events if e["reason"] == "FailedToStopRayJob"]
    assert failed and "ends with its RayCluster" in failed[0]["message"]
    ray(local_dashboard, lambda c: c.stop_job(status["jobId"]))


def test_a_pod_stored_whose_answer_was_lost_is_not_created_twice(
    kube: Kube, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API server stores a worker pod, then its answer is lost (a 500, as when etcd
    restarts mid-request) and the pod watch misses it for a while (a watch cut by the same
    restart): the operator must look the pod up by name, not create a second one. The pod cache
    shows it while that lookup is awaited (the watch catches up): the pods planned before the
    lookup, without it, must not be created (a clean-clone run created a fourth pod so)."""
    from rayquota.operator.core import resources
    from rayquota.operator.core.cache.informer import Informer
    from rayquota.operator.kube import ApiError, KubeClient
    from rayquota.operator.ray.vocabulary import labels

    real_create, real_get, real_apply = KubeClient.create, KubeClient.get, Informer._apply
    pods_path = f"/api/v1/namespaces/{namespace}/pods"
    stored: list[str] = []
    lost: list[str] = []
    # The cluster's pod cache does not see the lost pod until its lookup is under way; then the
    # latest withheld event is delivered, as a watch catching up would.
    withheld: list[tuple[Informer, Any]] = []
    delivered: list[str] = []

    def cluster_pod_cache(informer: Informer) -> bool:
        return informer.resource == resources.PODS and informer.label_selector == labels.RAY_CLUSTER

    async def create(self: KubeClient, path: str, body: Any) -> dict[str, Any]:
        labels_of_body = body["metadata"].get("labels") or {}
        first_worker = path == pods_path and labels_of_body.get("ray.io/node-type") == "worker" and not lost
        if first_worker:
            lost.append(str(body["metadata"]["name"]))  # before its watch events can arrive
        result = await real_create(self, path, body)
        if path == pods_path:
            stored.append(str(result["metadata"]["name"]))
        if first_worker:
            raise ApiError("POST", path, 500, '{"message": "etcdserver: request timed out"}')
        return result

    async def get(self: KubeClient, path: str) -> dict[str, Any] | None:
        found = await real_get(self, path)
        if lost and path == f"{pods_path}/{lost[0]}" and not delivered:
            delivered.append(path)
            if withheld:
                informer, latest = withheld[-1]
                real_apply(informer, "MODIFIED", latest)
        return found

    def apply(self: Informer, kind: str, obj: Any) -> None:
        if lost and obj["metadata"].get("name") == lost[0] and cluster_pod_cache(self) and not delivered:
            withheld.append((self, obj))
            return
        real_apply(self, kind, obj)

    monkeypatch.setattr(KubeClient, "create", create)
    monkeypatch.setattr(KubeClient, "get", get)
    monkeypatch.setattr(Informer, "_apply", apply)
    kube.apply(sample("lost-answer"))
    wait_for("head and 2 workers running", lambda: len(running(kube.pods("lost-answer"))) == 3, timeout_s=120)
    assert lost and withheld and delivered, f"the fault did not happen: {lost} {withheld} {delivered}"

    def three_pods() -> None:
        listed = {p["metadata"]["name"]: p.get("status", {}).get("phase") for p in kube.pods("lost-answer")}
        assert len(stored) == 3 and len(listed) == 3, f"created {stored} (lost: {lost[0]}), listed {listed}"

    # Nothing more is created once the lost pod shows up: 3 pods stored in all, never a 4th.
    holds("no pod beyond the 3", three_pods, seconds=3)
    assert lost[0] in {p["metadata"]["name"] for p in kube.pods("lost-answer")}
