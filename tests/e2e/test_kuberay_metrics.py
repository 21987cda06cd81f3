"""KubeRay's kuberay_* metric families, scraped from a running `rayquota run`, beside ours."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from rayquota.localcluster.cluster import LocalCluster
from rayquota.ports import free_port
from tests.polling import wait_for
from tests.sample_documents import SAMPLES

pytestmark = pytest.mark.usefixtures("crds_installed")

Series = dict[str, dict[tuple[tuple[str, str], ...], float]]


@pytest.fixture
def operator_metrics(control_plane: LocalCluster, namespace: str, tmp_path: Path) -> Iterator[str]:
    """`rayquota run` on the test's namespace, serving metrics on loopback; yields their URL."""
    port = free_port()
    log = tmp_path / "operator.log"
    command = [sys.executable, "-m", "rayquota.cli", "run", "-n", namespace, "--no-leader-elect"]
    command += ["--no-webhooks", f"--metrics-port={port}", "--health-port=0"]
    env = {**os.environ, "KUBECONFIG": str(control_plane.kubeconfig), "RAYQUOTA_BIND_ADDRESS": "127.0.0.1"}
    with log.open("wb") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for("the operator ready", lambda: "operator ready:" in log.read_text(errors="replace"), 60)
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0, log.read_text()[-3000:]


def scrape(url: str) -> Series:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    series: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return series


def quickstart(kind: str, namespace: str, **spec: Any) -> dict[str, Any]:
    manifest: dict[str, Any] = yaml.safe_load((SAMPLES / "quickstart" / f"{kind}.yaml").read_text())
    manifest["metadata"]["namespace"] = namespace
    manifest["spec"].update(spec)
    return manifest


def labelled(series: Series, family: str, **labels: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of `family` whose labels include `labels`."""
    return {k: v for k, v in series.get(family, {}).items() if set(labels.items()) <= set(k)}


def test_kuberays_families_describe_the_ray_objects_beside_our_own_metrics(
    control_plane: LocalCluster, namespace: str, operator_metrics: str
) -> None:
    cluster = quickstart("raycluster", namespace)
    # A deadline the RayJob cannot meet (no Ray head answers here): it fails, a terminal state.
    rayjob = quickstart("rayjob", namespace, activeDeadlineSeconds=2, backoffLimit=0)
    service = quickstart("rayservice", namespace)
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([cluster, rayjob, service]))
    names = {kind: m["metadata"]["name"] for kind, m in (("c", cluster), ("j", rayjob), ("s", service))}
    uid = {
        kind: control_plane.kubectl("get", m["kind"].lower(), m["metadata"]["name"], "-n", namespace,
                                    "-o", "jsonpath={.metadata.uid}").stdout
        for kind, m in (("c", cluster), ("j", rayjob), ("s", service))
    }  # fmt: skip
    ident = {kind: {"name": names[kind], "namespace": namespace, "uid": uid[kind]} for kind in names}

    def settled() -> Series | None:
        got = scrape(operator_metrics)
        provisioned = labelled(got, "kuberay_cluster_condition_provisioned", **ident["c"], condition="true")
        failed = labelled(got, "kuberay_job_deployment_status", **ident["j"], deployment_status="Failed")
        return got if provisioned and failed else None

    got = wait_for("the cluster provisioned and the RayJob failed, as scraped", settled, 180)
    assert labelled(got, "kuberay_cluster_info", **ident["c"], owner_kind="None") == {
        tuple(sorted({**ident["c"], "owner_kind": "None"}.items())): 1.0
    }
    # The RayJob's own cluster says where it comes from.
    assert labelled(got, "kuberay_cluster_info", namespace=namespace, owner_kind="RayJob")
    [duration] = labelled(got, "kuberay_cluster_provisioned_duration_seconds", **ident["c"]).values()
    assert 0 < duration < 180
    assert labelled(got, "kuberay_job_info", **ident["j"])
    [execution] = labelled(
        got,
        "kuberay_job_execution_duration_seconds",
        **ident["j"],
        job_deployment_status="Failed",
        retry_count="0",
    ).values()
    assert execution >= 2  # at least its deadline
    assert labelled(got, "kuberay_service_info", **ident["s"])
    assert labelled(got, "kuberay_service_condition_ready", **ident["s"], condition="false")
    assert labelled(got, "kuberay_service_condition_upgrade_in_progress", **ident["s"], condition="false")
    # Beside ours.
    assert "rayquota_controller_reconciles_total" in got

    # A deleted object's series go with it, its duration too.
    control_plane.kubectl("delete", "raycluster", names["c"], "-n", namespace)
    wait_for(
        "the deleted cluster's series gone",
        lambda: (
            not any(
                labelled(scrape(operator_metrics), family, **ident["c"])
                for family in ("kuberay_cluster_info", "kuberay_cluster_provisioned_duration_seconds")
            )
        ),
        60,
    )
