"""``rayquota usage`` and ``kubectl rayquota usage``: the Workloads of the chosen API group (Kueue's
in Kueue-API mode), the namespace as kubectl's flags say, the report in the format asked for.
No API server: a client that serves lists by path and records what was asked."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota import cli, kubectl_plugin, usage_cli
from rayquota.operator.kube import KubeClient
from rayquota.operator.queue.kueue.api_group import KUEUE, RAYQUOTA
from tests.unit.test_showback import kueue_history, local_queue, stamp

WINDOW = ["--since", stamp(0), "--until", stamp(10)]


class ListingClient:
    """Answers ``list_items`` from ``served`` (path -> items); remembers the paths asked."""

    def __init__(self, served: dict[str, list[dict[str, Any]]]) -> None:
        self.served = served
        self.asked: list[str] = []
        self.closed = False

    async def list_items(self, path: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        self.asked.append(path)
        return self.served.get(path, [])

    async def close(self) -> None:
        self.closed = True


def kueue_cluster() -> ListingClient:
    """Kueue v1beta2 Workloads and LocalQueues, listed per namespace and across all."""
    workloads, queues = (
        kueue_history(),
        [local_queue("team-a", "lq", "cq-a"), local_queue("team-b", "lq", "cq-b")],
    )
    served = {KUEUE.workloads.path(): workloads, KUEUE.local_queues.path(): queues}
    for namespace in ("team-a", "team-b"):
        served[KUEUE.workloads.path(namespace)] = [
            w for w in workloads if w["metadata"]["namespace"] == namespace
        ]
        served[KUEUE.local_queues.path(namespace)] = [
            q for q in queues if q["metadata"]["namespace"] == namespace
        ]
    return ListingClient(served)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> ListingClient:
    """The client both commands get: `rayquota` from the environment, the plugin from its Target."""
    client = kueue_cluster()
    monkeypatch.setattr(KubeClient, "from_environment", staticmethod(lambda kubeconfig=None: client))
    monkeypatch.setattr(kubectl_plugin.Target, "connect", lambda self: client)
    monkeypatch.delenv("RAYQUOTA_QUEUE_API", raising=False)
    return client


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    user, server = {"token": "t"}, {"server": "https://127.0.0.1:6443"}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": server}],
                "users": [{"name": "u", "user": user}],
                "contexts": [
                    {"name": "one", "context": {"cluster": "c", "user": "u", "namespace": "team-b"}},
                    {"name": "two", "context": {"cluster": "c", "user": "u"}},
                ],
                "current-context": "one",
            }
        )
    )
    return str(path)


def gpu_hours(report: dict[str, Any]) -> dict[str, float]:
    return {row["key"]: row["hours"]["nvidia.com/gpu"] for row in report["rows"]}


def test_fetch_lists_the_chosen_groups_workloads_and_local_queues() -> None:
    client = ListingClient({})
    asyncio.run(usage_cli.fetch("team-a", KUEUE, connect=lambda: client))
    assert client.asked == [
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads",
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues",
    ]
    assert client.closed
    client = ListingClient({})
    asyncio.run(usage_cli.fetch(None, RAYQUOTA, connect=lambda: client))
    assert client.asked == [RAYQUOTA.workloads.path(), RAYQUOTA.local_queues.path()]


def test_rayquota_usage_reads_kueues_workloads_in_kueue_api_mode(
    cluster: ListingClient, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli.main(["usage", "--queue-api", "kueue", *WINDOW, "-o", "json"]) == 0
    assert gpu_hours(json.loads(capsys.readouterr().out)) == pytest.approx({"cq-a": 68.0, "cq-b": 6.0})
    assert cluster.asked[-2:] == [KUEUE.workloads.path(), KUEUE.local_queues.path()]

    monkeypatch.setenv("RAYQUOTA_QUEUE_API", "kueue")  # the operator's own switch, as the plugin reads it
    assert cli.main(["usage", *WINDOW, "-n", "team-b", "-o", "json"]) == 0
    assert gpu_hours(json.loads(capsys.readouterr().out)) == pytest.approx({"cq-b": 6.0})
    assert cluster.asked[-1] == KUEUE.local_queues.path("team-b")

    # rayquota.io (the default) holds none of them: nothing to count.
    assert cli.main(["usage", "--queue-api", "rayquota", *WINDOW, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == []
    assert cluster.asked[-2:] == [RAYQUOTA.workloads.path(), RAYQUOTA.local_queues.path()]

    monkeypatch.setenv("RAYQUOTA_QUEUE_API", "kube")
    assert cli.main(["usage", *WINDOW]) == 2
    assert "$RAYQUOTA_QUEUE_API 'kube': expected one of rayquota, kueue" in capsys.readouterr().err


def test_kubectl_rayquota_usage_takes_kubectls_namespace_flags(
    cluster: ListingClient, kubeconfig: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def usage(*argv: str) -> str:
        code = kubectl_plugin.main(
            ["usage", "--kubeconfig", kubeconfig, "--queue-api", "kueue", *WINDOW, *argv]
        )
        assert code == 0, capsys.readouterr().err
        return capsys.readouterr().out

    # -n: that namespace's Workloads only (team-a: the trainer and the released job on cq-a).
    rows = list(csv.reader(io.StringIO(usage("-n", "team-a", "-o", "csv"))))
    assert rows[0][:2] == ["clusterqueue", "nvidia.com/gpu (hours)"]
    assert [(r[0], float(r[1])) for r in rows[1:]] == [("cq-a", 68.0)]
    assert cluster.asked[-2:] == [KUEUE.workloads.path("team-a"), KUEUE.local_queues.path("team-a")]

    # No flag: the context's namespace (team-b); -A: every namespace.
    assert gpu_hours(json.loads(usage("-o", "json"))) == {"cq-b": 6.0}
    assert cluster.asked[-1] == KUEUE.local_queues.path("team-b")
    everywhere = yaml.safe_load(usage("-A", "--by", "namespace", "-o", "yaml"))
    assert gpu_hours(everywhere) == pytest.approx({"team-a": 68.0, "team-b": 6.0})
    assert cluster.asked[-1] == KUEUE.local_queues.path()

    # --context picks the context, and with it its namespace (none: default).
    usage("--context", "two")
    assert cluster.asked[-1] == KUEUE.local_queues.path("default")

    # The default output is the table.
    table = usage("-A").splitlines()
    assert table[0].split()[:2] == ["CLUSTERQUEUE", "nvidia.com/gpu"]
    assert table[1].split()[:2] == ["cq-a", "*"]  # includes a Workload sized from its spec


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["usage", "-o", "wide"], "-o/--output 'wide': expected one of table, json, yaml, csv"),
        (["queues", "-o", "csv"], "-o/--output 'csv': expected one of json, yaml, wide, name"),
        (["usage", "--since", "yesterday"], "--since='yesterday'"),
        (
            ["usage", "-n", "team-a", "--prometheus-url", "http://127.0.0.1:9"],
            "--prometheus-url counts per ClusterQueue only: not with --namespace=team-a",
        ),
    ],
)
def test_kubectl_rayquota_usage_refuses_by_flag_and_value(
    cluster: ListingClient, kubeconfig: str, capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    assert kubectl_plugin.main([*argv, "--kubeconfig", kubeconfig]) == 2
    assert words in capsys.readouterr().err
