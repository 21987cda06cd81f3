"""kubectl rayquota's kueuectl verbs: flags parsed, bodies built, rows shown (no API server)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from rayquota import kueuectl_bodies as bodies
from rayquota.api.queueing_v1alpha1 import ClusterQueue, LocalQueue
from rayquota.kubectl_plugin import build_parser
from rayquota.kubectl_target import Target, context_namespace, name_of, target_of
from rayquota.kueuectl_bodies import ClusterQueueFlags, FlagError
from rayquota.localcluster.cli import path_additions
from rayquota.operator.queue.kueue.api_group import KUEUE, RAYQUOTA

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _stamp(delta: timedelta) -> str:
    return (NOW - delta).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- quota flags ----------------------------------------------------------------------------


def test_nominal_quota_of_two_flavors_with_the_same_resources_share_a_group() -> None:
    groups = bodies.resource_groups(
        {
            "--nominal-quota": [
                "alpha:cpu=9;memory=36Gi;nvidia.com/gpu=10,beta:cpu=18;memory=72Gi;nvidia.com/gpu=20"
            ]
        }
    )
    assert groups == [
        {
            "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
            "flavors": [
                {
                    "name": "alpha",
                    "resources": [
                        {"name": "cpu", "nominalQuota": "9"},
                        {"name": "memory", "nominalQuota": "36Gi"},
                        {"name": "nvidia.com/gpu", "nominalQuota": "10"},
                    ],
                },
                {
                    "name": "beta",
                    "resources": [
                        {"name": "cpu", "nominalQuota": "18"},
                        {"name": "memory", "nominalQuota": "72Gi"},
                        {"name": "nvidia.com/gpu", "nominalQuota": "20"},
                    ],
                },
            ],
        }
    ]


def test_limits_merge_into_the_flavor_of_the_nominal_quota() -> None:
    groups = bodies.resource_groups(
        {
            "--nominal-quota": ["alpha:cpu=9;memory=36Gi"],
            "--borrowing-limit": ["alpha:cpu=1;memory=1Gi"],
            "--lending-limit": ["alpha:cpu=2;memory=2Gi"],
        }
    )
    assert groups[0]["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": "9", "borrowingLimit": "1", "lendingLimit": "2"},
        {"name": "memory", "nominalQuota": "36Gi", "borrowingLimit": "1Gi", "lendingLimit": "2Gi"},
    ]


def test_flavors_of_different_resources_are_separate_groups() -> None:
    groups = bodies.resource_groups({"--nominal-quota": ["cpu-pool:cpu=8", "gpu-pool:nvidia.com/gpu=4"]})
    assert [g["coveredResources"] for g in groups] == [["cpu"], ["nvidia.com/gpu"]]


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        ({"--nominal-quota": ["alpha"]}, ["--nominal-quota", "'alpha'"]),
        ({"--nominal-quota": ["alpha:cpu"]}, ["--nominal-quota", "'cpu' is not RESOURCE=QUANTITY"]),
        ({"--nominal-quota": ["alpha:cpu=lots"]}, ["--nominal-quota", "'lots'"]),
        ({"--nominal-quota": ["alpha:cpu=-1"]}, ["--nominal-quota", "negative"]),
        ({"--nominal-quota": ["Alpha:cpu=1"]}, ["--nominal-quota", "'Alpha:cpu=1'"]),
        ({"--nominal-quota": ["alpha:cpu=1;cpu=2"]}, ["'cpu' named twice"]),
        (
            {"--nominal-quota": ["alpha:cpu=1"], "--borrowing-limit": ["alpha:memory=1Gi"]},
            ["--borrowing-limit", "'alpha'", "same resources"],
        ),
        ({"--nominal-quota": ["a:cpu=1;memory=1", "b:cpu=1"]}, ["'b'", "overlaps"]),
    ],
)
def test_bad_quota_flags_are_refused_by_flag_and_value(flags: dict[str, list[str]], words: list[str]) -> None:
    with pytest.raises(FlagError) as refused:
        bodies.resource_groups(flags)
    for word in words:
        assert word in str(refused.value)


# --- bodies ---------------------------------------------------------------------------------


def test_cluster_queue_body_is_a_valid_rayquota_cluster_queue() -> None:
    body = bodies.cluster_queue_body(
        RAYQUOTA,
        ClusterQueueFlags(
            name="team-a",
            cohort="research",
            queuing_strategy="StrictFIFO",
            namespace_selector="team=a,tier=gpu",
            reclaim_within_cohort="Any",
            preemption_within_cluster_queue="LowerPriority",
            quotas={
                "--nominal-quota": ["gpu:nvidia.com/gpu=8"],
                "--borrowing-limit": ["gpu:nvidia.com/gpu=2"],
            },
        ),
    )
    assert body["apiVersion"] == "rayquota.io/v1alpha1"
    spec = ClusterQueue.model_validate(body).spec
    assert spec.cohort == "research"
    assert spec.queueing_strategy == "StrictFIFO"
    assert body["spec"]["namespaceSelector"] == {"matchLabels": {"team": "a", "tier": "gpu"}}
    assert body["spec"]["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    assert body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] == "2"


def test_defaults_are_kueuectls_every_namespace_best_effort_no_preemption() -> None:
    body = bodies.cluster_queue_body(RAYQUOTA, ClusterQueueFlags(name="q"))
    assert body["spec"] == {
        "queueingStrategy": "BestEffortFIFO",
        "namespaceSelector": {},
        "preemption": {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"},
        "resourceGroups": [],
    }


def test_kueue_mode_names_the_kueue_group_and_cohort_name() -> None:
    body = bodies.cluster_queue_body(KUEUE, ClusterQueueFlags(name="q", cohort="c"))
    assert body["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert body["spec"]["cohortName"] == "c"
    assert "cohort" not in body["spec"]
    lq = bodies.local_queue_body(KUEUE, "lq", "ns", "q")
    assert lq["apiVersion"] == "kueue.x-k8s.io/v1beta2"


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (
            ClusterQueueFlags(name="q", queuing_strategy="FIFO"),
            ["--queuing-strategy", "'FIFO'", "StrictFIFO"],
        ),
        (
            ClusterQueueFlags(name="q", reclaim_within_cohort="Always"),
            ["--reclaim-within-cohort", "'Always'"],
        ),
        (
            ClusterQueueFlags(name="q", preemption_within_cluster_queue="Any"),
            ["--preemption-within-cluster-queue", "'Any'"],
        ),
        (ClusterQueueFlags(name="q", namespace_selector="team"), ["--namespace-selector", "'team'"]),
        (
            ClusterQueueFlags(
                name="q", quotas={"--nominal-quota": ["f:cpu=1"], "--lending-limit": ["f:cpu=1"]}
            ),
            ["--lending-limit needs --cohort"],
        ),
    ],
)
def test_bad_cluster_queue_flags_are_refused(flags: ClusterQueueFlags, words: list[str]) -> None:
    with pytest.raises(FlagError) as refused:
        bodies.cluster_queue_body(RAYQUOTA, flags)
    for word in words:
        assert word in str(refused.value)


def test_local_queue_body_needs_its_cluster_queue() -> None:
    body = bodies.local_queue_body(RAYQUOTA, "team-a", "research", "cq")
    assert LocalQueue.model_validate(body).spec.cluster_queue == "cq"
    assert body["metadata"] == {"name": "team-a", "namespace": "research"}
    with pytest.raises(FlagError, match="--clusterqueue"):
        bodies.local_queue_body(RAYQUOTA, "team-a", "research", "")


def test_stop_and_resume_patches() -> None:
    assert bodies.stop_patch(keep_already_running=False) == {"spec": {"stopPolicy": "HoldAndDrain"}}
    assert bodies.stop_patch(keep_already_running=True) == {"spec": {"stopPolicy": "Hold"}}
    assert bodies.resume_patch() == {"spec": {"stopPolicy": "None"}}
    assert bodies.active_patch(False) == {"spec": {"active": False}}


# --- rows -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (5, "5s"),
        (119, "119s"),
        (185, "3m5s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (30 * 3600, "30h"),
        (3 * 86400, "3d"),
    ],
)
def test_age_is_written_as_kubectl_writes_it(seconds: int, shown: str) -> None:
    assert bodies.age({"metadata": {"creationTimestamp": _stamp(timedelta(seconds=seconds))}}, NOW) == shown


def test_cluster_queue_row() -> None:
    cq = {
        "metadata": {"name": "q", "creationTimestamp": _stamp(timedelta(minutes=30))},
        "spec": {"cohortName": "c", "stopPolicy": "Hold", "queueingStrategy": "StrictFIFO"},
        "status": {
            "pendingWorkloads": 2,
            "admittedWorkloads": 1,
            "conditions": [{"type": "Active", "status": "False", "reason": "Stopped"}],
        },
    }
    assert bodies.cluster_queue_row(cq, NOW, wide=False) == ["q", "c", "2", "1", "false", "30m"]
    assert bodies.cluster_queue_row(cq, NOW, wide=True)[-2:] == ["StrictFIFO", "Hold"]


def test_workload_row_names_its_job_and_the_queue_its_local_queue_leads_to() -> None:
    wl = {
        "metadata": {
            "name": "rayjob-train-1a2b3",
            "namespace": "ns",
            "creationTimestamp": _stamp(timedelta(seconds=40)),
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "train", "uid": "u"}],
        },
        "spec": {"queueName": "lq", "podSets": []},
    }
    local_queues = {("ns", "lq"): {"spec": {"clusterQueue": "cq"}}}
    assert bodies.workload_row(wl, local_queues, NOW) == [
        "rayjob-train-1a2b3",
        "rayjob.ray.io",
        "train",
        "lq",
        "cq",
        "PENDING",
        "",
        "40s",
    ]


def test_admitted_workload_shows_its_admitting_queue_and_exec_time() -> None:
    wl = {
        "metadata": {"name": "w", "namespace": "ns", "creationTimestamp": _stamp(timedelta(minutes=5))},
        "spec": {"queueName": "lq", "podSets": []},
        "status": {
            "admission": {"clusterQueue": "other", "podSetAssignments": []},
            "conditions": [
                {"type": "QuotaReserved", "status": "True"},
                {"type": "Admitted", "status": "True", "lastTransitionTime": _stamp(timedelta(seconds=90))},
            ],
        },
    }
    row = bodies.workload_row(wl, {("ns", "lq"): {"spec": {"clusterQueue": "cq"}}}, NOW)
    assert row[4:7] == ["other", "ADMITTED", "90s"]


def test_status_filter() -> None:
    assert bodies.status_filter([]) is None
    assert bodies.status_filter(["Pending", "all"]) is None
    assert bodies.status_filter(["pending", "finished"]) == {"Pending", "Inadmissible", "Finished"}
    with pytest.raises(FlagError, match="--status 'running'"):
        bodies.status_filter(["running"])


# --- the plugin's command line --------------------------------------------------------------


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    cluster = {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {"name": "one", "context": {"cluster": "c", "user": "u", "namespace": "team-one"}},
                    {"name": "two", "context": {"cluster": "c", "user": "u"}},
                ],
                "current-context": "one",
            }
        )
    )
    return str(path)


def _target(
    argv: list[str], kubeconfig: str, env: dict[str, str] | None = None
) -> tuple[argparse.Namespace, Target]:
    args = build_parser().parse_args(argv)
    return args, target_of(args, {"KUBECONFIG": kubeconfig, **(env or {})})


def test_global_flags_are_taken_before_and_after_the_verb(kubeconfig: str) -> None:
    args, target = _target(["-n", "before", "list", "lq", "-o", "wide"], kubeconfig)
    assert (target.namespace, target.output, args.kind) == ("before", "wide", "lq")
    _, target = _target(["list", "workload", "-A", "--context", "two"], kubeconfig)
    assert target.all_namespaces and target.list_namespace is None
    assert target.namespace == "default"


def test_namespace_defaults_to_the_contexts(kubeconfig: str) -> None:
    _, target = _target(["workloads"], kubeconfig)
    assert target.namespace == "team-one"
    assert context_namespace(kubeconfig, "two") == "default"
    with pytest.raises(FlagError, match="--context 'three'"):
        context_namespace(kubeconfig, "three")


def test_queue_api_picks_the_group(kubeconfig: str) -> None:
    _, target = _target(["queues"], kubeconfig)
    assert target.api is RAYQUOTA
    _, target = _target(["queues"], kubeconfig, {"RAYQUOTA_QUEUE_API": "kueue"})
    assert target.api is KUEUE
    _, target = _target(["queues", "--queue-api", "kueue"], kubeconfig)
    assert target.api is KUEUE


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["queues", "-o", "table"], ["-o/--output 'table'"]),
        (["queues", "--queue-api", "kube"], ["--queue-api 'kube'"]),
    ],
)
def test_bad_global_flags_are_refused(kubeconfig: str, argv: list[str], words: list[str]) -> None:
    with pytest.raises(FlagError) as refused:
        _target(argv, kubeconfig)
    for word in words:
        assert word in str(refused.value)


def test_create_cluster_queue_collects_repeated_quota_flags(kubeconfig: str) -> None:
    args, _ = _target(
        ["create", "cq", "q", "--nominal-quota", "a:cpu=1", "--nominal-quota", "b:cpu=2", "--dry-run"],
        kubeconfig,
    )
    assert args.nominal_quota == ["a:cpu=1", "b:cpu=2"]
    assert args.dry_run == "client"


def test_stop_takes_keep_already_running_for_queues_only(kubeconfig: str) -> None:
    args, _ = _target(["stop", "clusterqueue", "q", "--keep-already-running"], kubeconfig)
    assert args.keep_already_running
    with pytest.raises(SystemExit):
        build_parser().parse_args(["stop", "workload", "w", "--keep-already-running"])


def test_name_output() -> None:
    assert name_of(
        {"apiVersion": "rayquota.io/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "q"}}
    ) == ("clusterqueue.rayquota.io/q")


def test_cluster_env_puts_the_plugin_on_path_when_installed(tmp_path: Path) -> None:
    assert str(tmp_path) not in path_additions(tmp_path)
    (tmp_path / "kubectl-rayquota").write_text("#!/bin/sh\n")
    assert path_additions(tmp_path)[-1] == str(tmp_path)


def test_a_429_is_asked_again_after_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    import kubernetes

    from rayquota.kubectl_target import PatientClient
    from rayquota.operator.kube import ApiError, KubeClient

    answers: list[object] = [
        ApiError("GET", "/x", 429, '{"message": "storage is (re)initializing"}', retry_after_s=0.01),
        ApiError("GET", "/x", 429, "{}", retry_after_s=0.01),
        {"kind": "Answer"},
    ]

    async def answer(self: KubeClient, method: str, path: str, **options: object) -> object:
        got = answers.pop(0)
        if isinstance(got, ApiError):
            raise got
        return got

    monkeypatch.setattr(KubeClient, "request", answer)
    configuration = kubernetes.client.Configuration()
    configuration.host = "http://127.0.0.1:1"
    assert asyncio.run(PatientClient(configuration).request("GET", "/x")) == {"kind": "Answer"}
    assert answers == []
    answers.append(ApiError("GET", "/x", 403, "{}"))
    with pytest.raises(ApiError):
        asyncio.run(PatientClient(configuration).request("GET", "/x"))


def test_all_namespaces_lists_lead_with_the_namespace(kubeconfig: str) -> None:
    from rayquota.cli_kueuectl import _with_namespace

    items = [{"metadata": {"name": "a", "namespace": "one"}}, {"metadata": {"name": "b", "namespace": "two"}}]
    rows = [["a", "cq"], ["b", "cq"]]
    _, everywhere = _target(["list", "lq", "-A"], kubeconfig)
    assert _with_namespace(everywhere, ["NAME", "CLUSTERQUEUE"], items, rows) == (
        ["NAMESPACE", "NAME", "CLUSTERQUEUE"],
        [["one", "a", "cq"], ["two", "b", "cq"]],
    )
    _, here = _target(["list", "lq"], kubeconfig)
    assert _with_namespace(here, ["NAME", "CLUSTERQUEUE"], items, rows)[0] == ["NAME", "CLUSTERQUEUE"]


def test_for_selects_the_workload_of_a_job() -> None:
    wl = {"metadata": {"ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "train"}]}}
    assert bodies.owned_by(wl, "rayjob/train")
    assert bodies.owned_by(wl, "RayJob.ray.io/train")
    assert not bodies.owned_by(wl, "rayjob.batch/train")
    assert not bodies.owned_by(wl, "rayjob/other")
    assert not bodies.owned_by(wl, "raycluster/train")
    with pytest.raises(FlagError, match="--for 'train'"):
        bodies.owned_by(wl, "train")


def test_list_workload_takes_for_and_field_selector(kubeconfig: str) -> None:
    args, _ = _target(
        ["list", "wl", "--for", "rayjob/train", "--field-selector", "metadata.name=w"], kubeconfig
    )
    assert (args.owner, args.field_selector) == ("rayjob/train", "metadata.name=w")


def test_wide_views_add_columns(
    kubeconfig: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rayquota import cli_tables, cli_views, kubectl_plugin
    from tests.unit.queue.test_cli_views import state

    async def fetched(*args: object, **kwargs: object) -> cli_views.QueueState:
        return state()

    monkeypatch.setattr(cli_views, "fetch_state", fetched)
    for view, wide_columns in (("queues", cli_tables.QUEUES_WIDE), ("workloads", cli_tables.WORKLOADS_WIDE)):
        assert kubectl_plugin.main([view, "--kubeconfig", kubeconfig]) == 0
        header = capsys.readouterr().out.splitlines()[0]
        assert not any(column in header for column in wide_columns)
        assert kubectl_plugin.main([view, "-o", "wide", "--kubeconfig", kubeconfig]) == 0
        header = capsys.readouterr().out.splitlines()[0]
        assert all(column in header for column in wide_columns), header
