"""RayCronJob on the local control plane, every minute, on a clock the test moves (no real minute
is waited): RayJobs appear on schedule, named and owned as KubeRay v1.7.0 makes them, and under
the queue each RayJob is queued on its own while the RayCronJob itself never is.

The operator (this folder's conftest) runs in a thread of its own on `qcron-*` namespaces with a
ManualClock; the queue folder's operator (on `q-*`) never sees these namespaces and has stopped
before this folder starts.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest
import yaml

from rayquota.operator.core.timestamps import parse_rfc3339
from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import Quota, is_admitted, pool_placement, workload_of
from tests.integration.ray.kubehelpers import Kube
from tests.manual_clock import ManualClock
from tests.polling import holds, wait_for
from tests.sample_documents import SAMPLES

GPUS_PER_RUN = 4
QUOTA_GPUS = 8


def every_minute(name: str, *, gpus: int = 0, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """samples/ray-cronjob.yaml, every minute in UTC, HTTPMode (no submitter Job), with `gpus` on
    its one worker (none: a head alone)."""
    cron: dict[str, Any] = yaml.safe_load((SAMPLES / "ray-cronjob.yaml").read_text())
    cron = copy.deepcopy(cron)
    cron["metadata"] = {"name": name, "labels": labels or {}}
    cron["spec"].update({"schedule": "* * * * *", "timeZone": "UTC"})
    template = cron["spec"]["jobTemplate"]
    template["submissionMode"] = "HTTPMode"
    workers = template["rayClusterSpec"]["workerGroupSpecs"]
    if gpus:
        limits = workers[0]["template"]["spec"]["containers"][0]["resources"]["limits"]
        limits["nvidia.com/gpu"] = gpus
    else:
        del template["rayClusterSpec"]["workerGroupSpecs"]
    return cron


def minute_after(moment: dt.datetime) -> dt.datetime:
    return moment.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)


def run_name(cron: str, run: dt.datetime) -> str:
    return f"{cron}-{int(run.timestamp()) // 60}"


def created_at(kube: Kube, name: str) -> dt.datetime:
    stored = kube.get("raycronjob", name)
    assert stored is not None
    moment = parse_rfc3339(stored["metadata"]["creationTimestamp"])
    assert moment is not None
    return moment


def rayjobs_of(kube: Kube, cron: str) -> list[str]:
    return sorted(j["metadata"]["name"] for j in kube.list("rayjobs", f"ray.io/cronjob-name={cron}"))


def last_schedule(kube: Kube, cron: str) -> str | None:
    return ((kube.get("raycronjob", cron) or {}).get("status") or {}).get("lastScheduleTime")


def test_every_minute_rayjobs_are_created_owned_named_as_kuberay_and_queued_each_on_its_own(
    cron_operator: None, clock: ManualClock, control_plane: Any, namespace: str
) -> None:
    kube = Kube(control_plane, namespace)
    quota = Quota(control_plane, namespace)
    try:
        cluster_queue = quota.a100_team_queue(gpus=QUOTA_GPUS)
        labels = {"kueue.x-k8s.io/queue-name": "team", "team": "vision"}
        # Every state the API server went through: no pod before its RayJob's admission, GPUs of
        # live pods (terminating ones included) within the quota, every GPU pod on the a100 pool.
        kubeconfig = str(control_plane.kubeconfig)
        with GateSampler(kubeconfig, namespace, cluster_queue, pool_placement("a100")) as sampler:
            scenario(kube, clock, every_minute("nightly", gpus=GPUS_PER_RUN, labels=labels), cluster_queue)
            sampler.assert_holds()
    finally:
        quota.delete_all()


def scenario(kube: Kube, clock: ManualClock, manifest: dict[str, Any], cluster_queue: str) -> None:
    kube.apply(manifest)
    cron = kube.get("raycronjob", "nightly")
    assert cron is not None
    created = created_at(kube, "nightly")
    first = minute_after(created)
    # Just before the first run: nothing is due, nothing is created.
    clock.set(first - dt.timedelta(seconds=1))
    holds("no RayJob before the first run", lambda: rayjobs_of(kube, "nightly") == [], seconds=2)

    clock.set(first)
    wait_for("the first run's RayJob", lambda: rayjobs_of(kube, "nightly") == [run_name("nightly", first)])
    rayjob = kube.get("rayjob", run_name("nightly", first))
    assert rayjob is not None
    meta = rayjob["metadata"]
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCronJob",
            "name": "nightly",
            "uid": cron["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    # The queue label is inherited, other labels are not.
    assert meta["labels"] == {"ray.io/cronjob-name": "nightly", "kueue.x-k8s.io/queue-name": "team"}
    assert meta["annotations"]["ray.io/cronjob-scheduled-timestamp"] == first.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert rayjob["spec"]["entrypoint"] == manifest["spec"]["jobTemplate"]["entrypoint"]
    wait_for(
        "lastScheduleTime", lambda: last_schedule(kube, "nightly") == first.strftime("%Y-%m-%dT%H:%M:%SZ")
    )

    # The operator was "away" for three more minutes: one RayJob per missed run, oldest first.
    clock.set(first + dt.timedelta(minutes=3, seconds=10))
    runs = [first + dt.timedelta(minutes=i) for i in range(4)]
    wait_for(
        "a RayJob for each missed run",
        lambda: rayjobs_of(kube, "nightly") == sorted(run_name("nightly", r) for r in runs),
    )
    latest = runs[-1].strftime("%Y-%m-%dT%H:%M:%SZ")
    wait_for("lastScheduleTime at the latest run", lambda: last_schedule(kube, "nightly") == latest)
    reasons = {e["reason"] for e in kube.events("nightly")}
    assert {"CreatedRayJob", "MissedSchedules"} <= reasons, reasons

    # Each RayJob is a Workload of its own; 8 GPUs admit two runs of 4, the other two wait.
    names = [run_name("nightly", r) for r in runs]
    wait_for(
        "two runs admitted, two pending",
        lambda: (
            sorted(is_admitted(workload_of(kube, "RayJob", n)) for n in names) == [False, False, True, True]
        ),
        timeout_s=120,
    )
    for name in names:
        workload = workload_of(kube, "RayJob", name)
        assert workload is not None and workload["spec"]["queueName"] == "team"
        assert workload["metadata"]["ownerReferences"][0]["name"] == name
    # The RayCronJob itself is never queued.
    assert workload_of(kube, "RayCronJob", "nightly") is None
    assert all(
        w["metadata"]["ownerReferences"][0]["kind"] == "RayJob" for w in kube.list("workloads.rayquota.io")
    )
    admitted = [n for n in names if is_admitted(workload_of(kube, "RayJob", n))]
    waiting = [n for n in names if n not in admitted]
    wait_for(
        "the admitted runs' GPU workers",
        lambda: all(len(kube.list("pods", f"ray.io/cluster={job_cluster(kube, n)}")) == 2 for n in admitted),
        timeout_s=120,
    )

    # Deleting one admitted run frees its quota for one waiting run: they queue independently.
    kube.kubectl("delete", "rayjob", admitted[0], "--wait=false")
    wait_for(
        "one waiting run admitted in its place",
        lambda: sum(is_admitted(workload_of(kube, "RayJob", n)) for n in waiting) == 1,
        timeout_s=120,
    )
    kube.kubectl("delete", "raycronjob", "nightly", "--wait=false")


def job_cluster(kube: Kube, rayjob: str) -> str:
    return str(((kube.get("rayjob", rayjob) or {}).get("status") or {}).get("rayClusterName") or "-")


def test_suspended_runs_nothing_and_resuming_catches_up_as_kuberay(
    cron_operator: None, clock: ManualClock, control_plane: Any, namespace: str
) -> None:
    kube = Kube(control_plane, namespace)
    manifest = every_minute("paused")
    manifest["spec"]["suspend"] = True
    kube.apply(manifest)
    first = minute_after(created_at(kube, "paused"))
    clock.set(first + dt.timedelta(minutes=1, seconds=5))
    wait_for(
        "the SuspendedRayCronJob event",
        lambda: "SuspendedRayCronJob" in {e["reason"] for e in kube.events("paused")},
    )
    holds("nothing created while suspended", lambda: rayjobs_of(kube, "paused") == [], seconds=2)
    kube.patch("raycronjob", "paused", {"spec": {"suspend": False}})
    expected = sorted(run_name("paused", first + dt.timedelta(minutes=i)) for i in range(2))
    wait_for("both runs missed while suspended", lambda: rayjobs_of(kube, "paused") == expected)


def test_an_invalid_cronjob_says_why_and_creates_nothing(
    cron_operator: None, clock: ManualClock, control_plane: Any, namespace: str
) -> None:
    kube = Kube(control_plane, namespace)
    manifest = every_minute("bad-schedule")
    manifest["spec"]["schedule"] = "61 * * * *"  # the CRD cannot parse cron: the controller refuses it
    kube.apply(manifest)
    clock.set(created_at(kube, "bad-schedule") + dt.timedelta(hours=2))

    def invalid_event() -> str | None:
        found = [e for e in kube.events("bad-schedule") if e["reason"] == "InvalidRayCronJobSpec"]
        return found[0]["message"] if found else None

    message = wait_for("the InvalidRayCronJobSpec event", invalid_event)
    assert "spec.schedule '61 * * * *' is not a valid cron schedule" in message, message
    assert rayjobs_of(kube, "bad-schedule") == []


def test_a_template_field_the_rayjobs_ignore_is_warned_on_the_raycronjob(
    cron_operator: None, clock: ManualClock, control_plane: Any, namespace: str
) -> None:
    kube = Kube(control_plane, namespace)
    manifest = every_minute("policy")
    manifest["spec"]["jobTemplate"]["rayClusterSpec"]["headGroupSpec"]["ingressOptions"] = {"host": "h"}
    kube.apply(manifest)

    def unimplemented_event() -> str | None:
        found = [e for e in kube.events("policy") if e["reason"] == "UnimplementedField"]
        return found[0]["message"] if found else None

    message = wait_for("the UnimplementedField event on the RayCronJob", unimplemented_event)
    assert message == (
        "field spec.jobTemplate.rayClusterSpec.headGroupSpec.ingressOptions is not implemented and is ignored"
    )


def test_a_template_asking_for_network_isolation_is_refused_on_the_raycronjob(
    cron_operator: None, clock: ManualClock, control_plane: Any, namespace: str
) -> None:
    kube = Kube(control_plane, namespace)
    manifest = every_minute("isolated")
    manifest["spec"]["jobTemplate"]["rayClusterSpec"]["networkPolicy"] = {}
    kube.apply(manifest)
    clock.set(created_at(kube, "isolated") + dt.timedelta(hours=2))

    def invalid_event() -> str | None:
        found = [e for e in kube.events("isolated") if e["reason"] == "InvalidRayCronJobSpec"]
        return found[0]["message"] if found else None

    message = wait_for("the InvalidRayCronJobSpec event", invalid_event)
    assert "spec.jobTemplate.rayClusterSpec.networkPolicy is refused" in message, message
    assert rayjobs_of(kube, "isolated") == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"metadata": {"name": "n" * 37}}, "RayCronJob name should be no more than 36 characters"),
        ({"spec": {"schedule": "TZ=UTC * * * * *"}}, "cannot use TZ or CRON_TZ in schedule"),
        ({"spec": {"timeZone": ""}}, "spec.timeZone"),
    ],
)
def test_the_api_server_refuses_what_the_crd_can_check(
    crds_installed: None, control_plane: Any, namespace: str, change: dict[str, Any], message: str
) -> None:
    manifest = every_minute("refused")
    manifest["metadata"].update(change.get("metadata", {}))
    manifest["spec"].update(change.get("spec", {}))
    result = Kube(control_plane, namespace).kubectl(
        "create", "-f", "-", input=yaml.safe_dump(manifest), check=False
    )
    assert result.returncode != 0 and message in result.stderr, result.stderr
