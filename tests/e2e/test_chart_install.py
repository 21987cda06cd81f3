"""`helm install` into the local control plane, in both modes, and the operator run locally with
the chart's ServiceAccount token: the queue scenario completes, no request is forbidden, and every
request it makes is one rayquota.operator.permissions declares (so the chart, tested equal to
those declarations in test_chart_rbac.py, is sufficient as well as minimal).

The operator pods themselves run on kwok's fake nodes (no image is pulled here), so the
operator under test is a local process holding the same credentials the pods would hold.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from cryptography import x509

from rayquota.localcluster.cluster import LocalCluster
from rayquota.operator.config import OperatorConfig
from rayquota.operator.permissions import offline_manager, reads_of, required_permissions
from tests.e2e.chart import CHART, REPO, grant_of_request, helm, is_discovery, service_account_kubeconfig
from tests.polling import wait_for
from tests.quota import (
    Quota,
    admitted_workload,
    cluster_pods,
    get_json,
    pending_workload,
    sample_cluster,
    workload_of,
)
from tests.quota import quota as quota  # the fixture

pytestmark = pytest.mark.usefixtures("crds_installed")


@dataclass
class Release:
    name: str
    namespace: str

    @property
    def fullname(self) -> str:
        return f"{self.name}-rayquota"


# The chart refuses in-cluster webhooks where every node is a kwok fake, unless told otherwise.
ON_FAKE_NODES = "webhooks.allowFakeNodes=true"


def install(cluster: LocalCluster, namespace: str, *values: str, chart: Path = CHART) -> Release:
    release = Release(f"rq-{namespace[-6:]}", namespace)
    helm_release(cluster, "install", release, chart, *values)
    return release


def helm_release(cluster: LocalCluster, action: str, release: Release, chart: Path, *values: str) -> None:
    """`helm install|upgrade`, waiting until the Deployment is ready."""
    sets = [arg for value in values for arg in ("--set", value)]
    name, namespace = release.name, release.namespace
    result = helm(
        action, name, str(chart), "-n", namespace, "--wait", "--timeout", "120s", *sets, cluster=cluster
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def releases(control_plane: LocalCluster) -> Iterator[list[Release]]:
    installed: list[Release] = []
    try:
        yield installed
    finally:
        for release in installed:
            helm("uninstall", release.name, "-n", release.namespace, "--wait", cluster=control_plane)


class LocalOperator:
    """`rayquota run` under a kubeconfig, recording its requests (tests/e2e/recording_operator.py)."""

    def __init__(
        self,
        kubeconfig: Path,
        namespace: str,
        log_dir: Path,
        *args: str,
        watch: str | None = None,
        **env: str,
    ) -> None:
        """`namespace`: the release's (the Lease, the certificate); `watch`: the managed one
        (default the same)."""
        self.requests = log_dir / "requests.log"
        self.output = log_dir / "operator.log"
        environment = dict(
            os.environ,
            KUBECONFIG=str(kubeconfig),
            RAYQUOTA_TEST_REQUEST_LOG=str(self.requests),
            RAYQUOTA_OPERATOR_NAMESPACE=namespace,  # the Lease and the certificate live there
            **env,
        )
        command = [sys.executable, "-m", "tests.e2e.recording_operator", "run", "-n", watch or namespace]
        with self.output.open("wb") as out:
            self.proc = subprocess.Popen(
                [*command, "--health-port=0", "--metrics-port=0", *args],
                env=environment,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
            )

    def log(self) -> str:
        return self.output.read_text(errors="replace")

    def progress(self) -> tuple[int, int, int]:
        """What grows while the operator starts: its log, its recorded requests and the CPU
        seconds it used (a start-up on a loaded machine spends minutes importing, silently)."""
        requests = self.requests.stat().st_size if self.requests.exists() else 0
        try:
            cpu = psutil.Process(self.proc.pid).cpu_times()
            used = int(cpu.user + cpu.system)
        except psutil.Error:  # it ended: nothing more will grow
            used = -1
        return self.output.stat().st_size, requests, used

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.log()

    def grants(self) -> set[tuple[str, str, str]]:
        return {
            grant_of_request(line)
            for line in self.requests.read_text().splitlines()
            if line and not is_discovery(line)
        }


def declared_grants(reconcilers: bool, self_issued_cert: bool) -> set[tuple[str, str, str]]:
    config = OperatorConfig(reconcilers_enabled=reconcilers)
    manager, components = offline_manager(config)
    needed = required_permissions(manager, components, self_issued_cert=self_issued_cert)
    every = needed.namespaced | needed.cluster | needed.own_namespace
    return {(p.group, p.resource, p.verb) for p in every}


def assert_only_declared_requests(
    operator: LocalOperator, declared: set[tuple[str, str, str]], out: str
) -> None:
    undeclared = sorted(operator.grants() - declared)
    assert not undeclared, f"requests not declared in rayquota.operator.permissions: {undeclared}"
    assert "Forbidden" not in out and " 403" not in out, out[-4000:]


def test_full_install_runs_the_queue_scenario_under_the_charts_account(
    control_plane: LocalCluster, namespace: str, quota: Quota, releases: list[Release], tmp_path: Path
) -> None:
    # Its objects stay in the release's namespace, which the webhooks skip (their pods are kwok fakes).
    release = install(control_plane, namespace, ON_FAKE_NODES)
    releases.append(release)
    deployment = get_json(control_plane, "deployment", release.fullname, "-n", namespace)
    assert deployment is not None and deployment["status"].get("readyReplicas") == 2
    kubeconfig = service_account_kubeconfig(control_plane, namespace, release.fullname)
    operator = LocalOperator(
        kubeconfig,
        namespace,
        tmp_path,
        RAYQUOTA_WEBHOOK_CERT_SECRET=f"{release.fullname}-webhook-cert",
        RAYQUOTA_WEBHOOK_HOSTS=f"{release.fullname}-webhook.{namespace}.svc",
        RAYQUOTA_WEBHOOK_CONFIGURATIONS=release.fullname,
    )
    try:
        fits = sample_cluster(namespace)
        too_big = sample_cluster(namespace, "too-big", gpu_workers=5)  # 10 GPUs: over quota alone
        control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([fits, too_big]))
        name = fits["metadata"]["name"]
        admitted = wait_for(
            "the sample's Workload admitted",
            lambda: admitted_workload(control_plane, namespace, name),
            90,
        )
        assert admitted["status"]["admission"]["clusterQueue"] == quota.cluster_queue
        wait_for(
            "the admitted RayCluster ready (autoscaler RBAC, pods, services, status)",
            lambda: (
                (
                    (get_json(control_plane, "raycluster", name, "-n", namespace) or {}).get("status") or {}
                ).get("state")
                == "ready"
            ),
            90,
        )
        wait_for(
            "the over-quota RayCluster's Workload pending with a reason",
            lambda: pending_workload(control_plane, namespace, "too-big"),
            60,
        )
        assert not cluster_pods(control_plane, namespace, "too-big")
        secret = wait_for(
            "the operator to issue the webhook certificate",
            lambda: (
                (
                    (
                        s := get_json(
                            control_plane, "secret", f"{release.fullname}-webhook-cert", "-n", namespace
                        )
                    )
                    or {}
                ).get("data")
                and s
            ),
        )
        assert_ca_bundle_published(control_plane, release, secret)
    finally:
        out = operator.stop()
    assert operator.proc.returncode == 0, out[-4000:]
    assert_only_declared_requests(operator, declared_grants(reconcilers=True, self_issued_cert=True), out)


def assert_ca_bundle_published(
    cluster: LocalCluster, release: Release, secret: dict[str, Any], hosts: list[str] | None = None
) -> None:
    """The Secret's certificate covers `hosts` (default: the chart's webhook Service) and its CA
    is the caBundle of every webhook of the release."""
    ca = secret["data"]["ca.crt"]
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    covered = [*names.get_values_for_type(x509.DNSName), *map(str, names.get_values_for_type(x509.IPAddress))]
    assert covered == (hosts or [f"{release.fullname}-webhook.{release.namespace}.svc"])

    def published() -> bool:
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            config = get_json(cluster, kind, release.fullname) or {}
            if not config.get("webhooks") or any(
                h["clientConfig"].get("caBundle") != ca for h in config["webhooks"]
            ):
                return False
        return True

    wait_for("the caBundle on every webhook", published)


def test_admission_only_install_beside_kuberay(
    control_plane: LocalCluster, namespace: str, quota: Quota, releases: list[Release], tmp_path: Path
) -> None:
    release = install(control_plane, namespace, "reconcilers.enabled=false", "webhooks.enabled=false")
    releases.append(release)
    deployment = get_json(control_plane, "deployment", release.fullname, "-n", namespace)
    assert deployment is not None and deployment["status"].get("readyReplicas") == 2
    config_map = get_json(control_plane, "configmap", f"{release.fullname}-config", "-n", namespace)
    assert config_map is not None
    assert yaml.safe_load(config_map["data"]["config.yaml"])["kuberay"]["reconcilersEnabled"] is False
    kubeconfig = service_account_kubeconfig(control_plane, namespace, release.fullname)
    operator = LocalOperator(kubeconfig, namespace, tmp_path, RAYQUOTA_RECONCILERS_ENABLED="false")
    try:
        fits = sample_cluster(namespace)
        name = fits["metadata"]["name"]
        fits["spec"]["suspend"] = True  # as a Kueue user (or our webhook) writes it
        control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(fits))
        wait_for(
            "the Workload admitted",
            lambda: admitted_workload(control_plane, namespace, name),
            90,
        )
        wait_for(
            "the gate lifted for KubeRay's operator",
            lambda: (
                (get_json(control_plane, "raycluster", name, "-n", namespace) or {})["spec"].get("suspend")
                is False
            ),
        )
        wait_for("the operator to log that it runs", lambda: "operator ready:" in operator.log())
        # Our reconcilers are off: pods are KubeRay's business here.
        assert "components: queue" in operator.log()
        assert not cluster_pods(control_plane, namespace, name)
    finally:
        out = operator.stop()
    assert operator.proc.returncode == 0, out[-4000:]
    assert_only_declared_requests(operator, declared_grants(reconcilers=False, self_issued_cert=False), out)


# The last commit of chart 0.1.0 (before webhooks, the split RBAC and the ray.io subchart).
PREVIOUS_CHART_COMMIT = "08681211e47c920f8a213cfa686efdbcbb4d5c03"


def previous_chart(into: Path) -> Path:
    """The previous chart version as released, extracted with the CRDs its crds/ links to."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", PREVIOUS_CHART_COMMIT, "helm/rayquota", "crds"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "helm" / "rayquota"


def upgrade_reads(cluster: LocalCluster, namespace: str, account: str) -> str:
    """A ClusterRole (and its binding to `account`) with get/list/watch on everything this
    operator version watches; returns its name."""
    manager, _ = offline_manager(OperatorConfig())
    rules = [
        {"apiGroups": [p.group], "resources": [p.resource.split("/")[0]], "verbs": ["get", "list", "watch"]}
        for permissions in reads_of(manager).values()
        for p in permissions
        if p.verb == "list"
    ]
    name = f"{namespace}-upgrade-reads"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": rules,
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([role, binding]))
    return name


def running_pods(cluster: LocalCluster, namespace: str, name: str) -> dict[str, str]:
    """uid -> name of the cluster's Running pods."""
    return {
        p["metadata"]["uid"]: p["metadata"]["name"]
        for p in cluster_pods(cluster, namespace, name)
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    }


def test_upgrade_from_the_previous_chart_keeps_admitted_workloads_and_running_pods(
    control_plane: LocalCluster, namespace: str, quota: Quota, releases: list[Release], tmp_path: Path
) -> None:
    old_chart = previous_chart(tmp_path)
    old_version = yaml.safe_load((old_chart / "Chart.yaml").read_text())["version"]
    release = install(control_plane, namespace, chart=old_chart)
    releases.append(release)
    # The operator holds the release's ServiceAccount token throughout: the old chart's RBAC
    # before the upgrade, the new one after it.
    kubeconfig = service_account_kubeconfig(control_plane, namespace, release.fullname)
    # Helm applies a new chart's RBAC before its Deployment's pods roll, so this operator version
    # never runs under the previous chart's grants alone: it starts with them plus the reads it
    # watches (what the upgrade brings first), which are taken away again after the upgrade.
    reads = upgrade_reads(control_plane, namespace, release.fullname)
    # The previous chart predates RayCronJob (its RBAC cannot list them): this operator runs with
    # KubeRay's gate off, as a release of that time would have.
    operator = LocalOperator(kubeconfig, namespace, tmp_path, RAYQUOTA_FEATURE_GATES="RayCronJob=false")
    try:
        sample = sample_cluster(namespace)
        name = sample["metadata"]["name"]
        control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(sample))
        admitted = wait_for(
            "the Workload admitted",
            lambda: admitted_workload(control_plane, namespace, name),
            90,
        )
        pods = wait_for(
            "all four pods Running",
            lambda: (p := running_pods(control_plane, namespace, name)) and len(p) == 4 and p,
            90,
        )

        helm_release(control_plane, "upgrade", release, CHART, ON_FAKE_NODES)
        history = helm("history", release.name, "-n", namespace, "-o", "json", cluster=control_plane)
        charts = [entry["chart"] for entry in json.loads(history.stdout)]
        assert charts == [
            f"rayquota-{old_version}",
            f"rayquota-{yaml.safe_load((CHART / 'Chart.yaml').read_text())['version']}",
        ]
        deployment = get_json(control_plane, "deployment", release.fullname, "-n", namespace) or {}
        assert deployment["status"].get("readyReplicas") == 2
        control_plane.kubectl("delete", "clusterrolebinding,clusterrole", reads, "--wait=true")

        # The operator keeps working under the new, narrower RBAC: a second cluster is admitted.
        after = sample_cluster(namespace, "after-upgrade", gpu_workers=2)
        control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(after))
        wait_for(
            "the post-upgrade cluster's Workload admitted",
            lambda: admitted_workload(control_plane, namespace, "after-upgrade"),
            90,
        )
        # Same pods, still running; same admission, never re-admitted.
        assert running_pods(control_plane, namespace, name) == pods
        still = workload_of(control_plane, namespace, name) or {}
        assert still["status"]["admission"] == admitted["status"]["admission"]
        admitted_at = [
            c["lastTransitionTime"] for c in admitted["status"]["conditions"] if c["type"] == "Admitted"
        ]
        assert [
            c["lastTransitionTime"] for c in still["status"]["conditions"] if c["type"] == "Admitted"
        ] == admitted_at
    finally:
        out = operator.stop()
        control_plane.kubectl(
            "delete", "clusterrolebinding,clusterrole", reads, "--ignore-not-found", check=False
        )
    assert operator.proc.returncode == 0, out[-4000:]
    assert "Forbidden" not in out, out[-4000:]


def test_the_chart_refuses_a_cluster_of_fake_nodes_where_its_webhooks_would_break_rayquota_run(
    control_plane: LocalCluster, namespace: str
) -> None:
    """On the local control plane the chart's pods never run; webhooks pointed at them (failurePolicy
    Fail) would refuse every queue and queued object of a running `rayquota run`: refused, and
    nothing is installed."""
    name = f"rq-{namespace[-6:]}"
    result = helm("install", name, str(CHART), "-n", namespace, cluster=control_plane)
    assert result.returncode != 0
    assert "every node of this cluster is a kwok fake" in result.stderr, result.stderr
    assert "webhooks.url" in result.stderr and "webhooks.enabled=false" in result.stderr
    assert helm("status", name, "-n", namespace, cluster=control_plane).returncode != 0
    configs = get_json(control_plane, "validatingwebhookconfigurations,mutatingwebhookconfigurations") or {}
    assert not [c for c in configs.get("items", []) if c["metadata"]["name"].startswith(name)]
    # What the chart allows there: webhooks served by a locally run operator, or none.
    for values in ("webhooks.url=https://127.0.0.1:9443", "webhooks.enabled=false"):
        dry = helm(
            "install",
            name,
            str(CHART),
            "-n",
            namespace,
            "--dry-run=server",
            "--set",
            values,
            cluster=control_plane,
        )
        assert dry.returncode == 0, dry.stderr


def test_the_charts_notes_name_the_workloads_as_the_readme_does(
    control_plane: LocalCluster, namespace: str
) -> None:
    """`kubectl get workloads` may answer with Kueue's Workloads: the notes and the README both
    use the full name."""
    readme = (REPO / "README.md").read_text()
    for values, resource in (
        ((), "workloads.rayquota.io"),
        (("kueueApi.enabled=true",), "workloads.kueue.x-k8s.io"),
    ):
        sets = [arg for value in values for arg in ("--set", value)]
        dry = helm(
            "install",
            "rayquota",
            str(CHART),
            "-n",
            namespace,
            "--dry-run=client",
            *sets,
            cluster=control_plane,
        )
        assert dry.returncode == 0, dry.stderr
        notes = dry.stdout.split("NOTES:", 1)[1]
        assert f"kubectl get {resource} -A" in notes, notes
        assert "get workloads -A" not in notes
    assert "kubectl get workloads.rayquota.io -A" in readme
    assert "deployment/rayquota" in readme and "rollout status deployment/rayquota" in dry.stdout
