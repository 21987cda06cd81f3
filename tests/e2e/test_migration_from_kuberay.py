"""Migrating a running KubeRay installation to rayquota, beside KubeRay's real operator (v1.6.2;
another release by hand: ``RAYQUOTA_MIGRATION_KUBERAY=v1.7.0``, built with ``rayquota peers build
kuberay --source DIR --tag v1.7.0``).

A control plane of its own plays a cluster that runs KubeRay: KubeRay's CRDs and its operator.
Under KubeRay a RayCluster becomes ready, a RayJob (K8sJobMode) runs, and a RayService with GCS
fault tolerance on the real Redis the test starts serves. KubeRay's operator reaches the heads'
dashboards by their Service names through a hosts file of the test's (tests/e2e/kuberay_heads.py),
and so does rayquota's afterwards: both run with it as their /etc/hosts, and rayquota finds the
dashboards as in production (the head Service's DNS name).

Then the steps of docs/install.md "Migrating from KubeRay": KubeRay's operator stopped (by its
PID), rayquota's CRDs applied over KubeRay's, the chart installed (reconcilers on), rayquota run
under the chart's ServiceAccount. Every pod, Service and Job is the one KubeRay made (same UID),
the statuses carry on without going back, no object's generation grows without a user's change
(a watch samples every version), a RayService upgrade works under rayquota, and deleting the
RayJob and the RayService completes with KubeRay's finalizers on them. The way back (rayquota
stopped, KubeRay's CRDs and operator again): the RayCluster carries on under KubeRay and its
deletion completes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from rayquota.localcluster import kuberay_source, peers
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.nodes import MANUAL_COMPLETION_LABEL
from rayquota.operator.config import OperatorConfig
from rayquota.ports import free_port
from tests.e2e.chart import CHART, helm, service_account_kubeconfig
from tests.e2e.kuberay_heads import FakeHeads, HostsFile, with_hosts_file
from tests.gate_sampler import GateSampler, _Feed
from tests.polling import holds, wait_for
from tests.quota import REPO
from tests.redis_server import RedisServer

IMAGE = "rayproject/ray:2.41.0"
JOB_ID = "migrated-job"
SERVE_CONFIG = "applications:\n  - name: greeter\n    import_path: greeter:app\n    route_prefix: /\n"
RAYQUOTA = str(Path(sys.executable).parent / "rayquota")
RAYQUOTA_VERSION = OperatorConfig().version
STABLE_S = 8  # how long rayquota's first reconciles are watched for anything going back
# The KubeRay release migrated from: the pinned one in `make test`, another for a run by hand.
KUBERAY_VERSION = os.environ.get("RAYQUOTA_MIGRATION_KUBERAY") or peers.KUBERAY_VERSION


def kuberay_build(version: str = KUBERAY_VERSION) -> tuple[Path, Path] | None:
    """KubeRay's operator binary and CRD directory at ``version``, or None when not built: the
    pinned release from the module cache, another from `rayquota peers build kuberay --source`."""
    if version == peers.KUBERAY_VERSION:
        return (peers.kuberay_binary(), peers.kuberay_crd_dir()) if peers.KUBERAY.is_built() else None
    built = kuberay_source.build_dir(version)
    binary, crds = built / kuberay_source.BINARY, built / kuberay_source.CRD_DIR
    return (binary, crds) if binary.is_file() and crds.is_dir() else None


def build_hint(version: str) -> str:
    if version == peers.KUBERAY_VERSION:
        return "run `.venv/bin/rayquota peers build kuberay`"
    return f"run `.venv/bin/rayquota peers build kuberay --source DIR --tag {version}`"


# --- the control plane, the heads, the two operators ------------------------------------------


@pytest.fixture(scope="module")
def kuberay_cluster() -> Iterator[LocalCluster]:
    """A control plane with KubeRay's CRDs (and rayquota.io's, which nothing uses until the
    migration; the sampler watches Workloads from the start)."""
    build = kuberay_build()
    if build is None:
        pytest.skip(f"KubeRay {KUBERAY_VERSION} is not built: {build_hint(KUBERAY_VERSION)}")
    cluster = LocalCluster(name=f"pytest-{os.getpid()}-migrate")
    cluster.up()
    try:
        cluster.kubectl("apply", "--server-side", "-f", str(build[1]), timeout=240)
        _established(cluster, [f"crd/{k}.ray.io" for k in ("rayclusters", "rayjobs", "rayservices")])
        _apply_crds(cluster, "rayquota.io_*.yaml")
        yield cluster
    finally:
        cluster.down(quiet=True, purge=True)


def _established(cluster: LocalCluster, names: list[str]) -> None:
    wait_for(
        "the CRDs established",
        lambda: all(
            '"Established"' in cluster.kubectl("get", name, "-o", "json", check=False).stdout
            for name in names
        ),
        120,
        1.0,
    )


def _apply_crds(cluster: LocalCluster, pattern: str) -> None:
    paths = sorted(str(p) for p in (REPO / "crds").glob(pattern))
    args = [arg for path in paths for arg in ("-f", path)]
    cluster.kubectl("apply", "--server-side", "--force-conflicts", *args, timeout=240)
    names = [f"crd/{Path(p).stem.split('_', 1)[1]}.{Path(p).stem.split('_', 1)[0]}" for p in paths]
    _established(cluster, names)


@pytest.fixture
def namespace(kuberay_cluster: LocalCluster) -> Iterator[str]:
    name = f"migrate-{os.getpid()}"
    kuberay_cluster.kubectl("create", "namespace", name)
    wait_for(
        "the default service account",
        lambda: kuberay_cluster.kubectl("get", "sa", "default", "-n", name, check=False).returncode == 0,
    )
    try:
        yield name
    finally:
        kuberay_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def heads(namespace: str, tmp_path: Path) -> Iterator[FakeHeads]:
    first = 0x4E0000 + (os.getpid() % 200) * 256 + 1  # 127.78.x.1 on: apart from the other e2e tests
    fake = FakeHeads(HostsFile(tmp_path / "hosts"), namespace, free_port(), first)
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


@contextmanager
def running(command: Sequence[str], env: Mapping[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process for the duration of the block, stopped by its PID."""
    with log.open("ab") as out:
        proc = subprocess.Popen(list(command), env=dict(env), stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        yield proc
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _environment(kubeconfig: Path, **extra: str) -> dict[str, str]:
    # The test's own setting is no operator's (rayquota would warn that it ignores it).
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.lower().endswith("_proxy") and k != "RAYQUOTA_MIGRATION_KUBERAY"
    }
    return dict(env, KUBECONFIG=str(kubeconfig), **extra)


def kuberay(cluster: LocalCluster, namespace: str, heads: FakeHeads, log: Path) -> Any:
    command = peers.kuberay_command(metrics_port=free_port(), health_port=free_port(), namespaces=[namespace])
    build = kuberay_build()
    assert build is not None, build_hint(KUBERAY_VERSION)  # the cluster fixture skipped otherwise
    command[0] = str(build[0])
    return running(with_hosts_file(command, heads.hosts), _environment(cluster.kubeconfig), log)


def rayquota(kubeconfig: Path, namespace: str, heads: FakeHeads, log: Path) -> Any:
    """`rayquota run` as the chart's Deployment runs it (its arguments and environment), under the
    chart's ServiceAccount, without the webhooks (no queued object here)."""
    command = [
        RAYQUOTA, "run", f"--namespace={namespace}", "--metrics-port=0", "--health-port=0",
        "--leader-elect", "--no-webhooks",
    ]  # fmt: skip
    env = _environment(
        kubeconfig,
        RAYQUOTA_OPERATOR_NAMESPACE=namespace,
        RAYQUOTA_RECONCILERS_ENABLED="true",
        RAYQUOTA_BIND_ADDRESS="127.0.0.1",
    )
    return running(with_hosts_file(command, heads.hosts), env, log)


# --- the objects --------------------------------------------------------------------------------


def _container(name: str, dashboard_port: int | None = None) -> dict[str, Any]:
    limits = {"cpu": "1", "memory": "2Gi"}
    container: dict[str, Any] = {
        "name": name,
        "image": IMAGE,
        "resources": {"limits": limits, "requests": limits},
    }
    if dashboard_port is not None:
        # Ports written out replace KubeRay's defaults: Serve's is wanted for the serve Service.
        container["ports"] = [
            {"name": "dashboard", "containerPort": dashboard_port},
            {"name": "gcs-server", "containerPort": 6379},
            {"name": "serve", "containerPort": 8000},
        ]
    return container


def cluster_spec(dashboard_port: int, workers: int = 1) -> dict[str, Any]:
    return {
        "rayVersion": "2.41.0",
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [_container("ray-head", dashboard_port)]}},
        },
        "workerGroupSpecs": [
            {
                "groupName": "workers",
                "replicas": workers,
                "minReplicas": 0,
                "maxReplicas": 4,
                "rayStartParams": {},
                "template": {"spec": {"containers": [_container("ray-worker")]}},
            }
        ],
    }


def manifests(namespace: str, port: int, redis: RedisServer) -> list[dict[str, Any]]:
    def obj(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "ray.io/v1",
            "kind": kind,
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }

    service_cluster = cluster_spec(port)
    service_cluster["gcsFaultToleranceOptions"] = {
        "redisAddress": redis.address,
        "redisPassword": {"valueFrom": {"secretKeyRef": {"name": "redis-auth", "key": "password"}}},
    }
    submitter = {
        # Kept Running (kwok would complete a Job's pod at once): the Ray job is still going.
        "metadata": {"labels": {MANUAL_COMPLETION_LABEL: "true"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "ray-job-submitter",
                    "image": IMAGE,
                    "resources": {"requests": {"cpu": "500m", "memory": "200Mi"}},
                }
            ],
        },
    }
    return [
        obj("RayCluster", "rc", cluster_spec(port)),
        obj(
            "RayJob",
            "job",
            {
                "entrypoint": "python -c 'import time; time.sleep(3600)'",
                "jobId": JOB_ID,
                "submissionMode": "K8sJobMode",
                "rayClusterSpec": cluster_spec(port),
                "submitterPodTemplate": submitter,
            },
        ),
        obj(
            "RayService",
            "svc",
            {
                "serveConfigV2": SERVE_CONFIG,
                # kwok's pod addresses lead nowhere: no proxy health checks of the head pod.
                "excludeHeadPodFromServeSvc": True,
                "rayClusterDeletionDelaySeconds": 2,
                "rayClusterConfig": service_cluster,
            },
        ),
    ]


# --- reading the namespace ------------------------------------------------------------------------


def sampler_of(cluster: LocalCluster, namespace: str) -> GateSampler:
    """Every version of the namespace's objects (no quota judged here: nothing is queued)."""
    sampler = GateSampler(str(cluster.kubeconfig), namespace, "none", None)
    core = client.CoreV1Api(sampler.api)
    sampler.feeds.append(_Feed("Service", core.list_namespaced_service, (namespace,)))
    return sampler.start()


def renewed(sampler: GateSampler, cluster: LocalCluster, namespace: str) -> GateSampler:
    """A new sampler after the ``ray.io`` CRDs were replaced: a watch opened on the old CRD's
    storage delivers nothing more (the stored objects move on, the watch shows none of it)."""
    sampler.close()
    fresh = sampler_of(cluster, namespace)
    fresh.sync()
    return fresh


def spec_growth(sampler: GateSampler, kinds: tuple[str, ...]) -> dict[str, int]:
    """``kind/name`` -> how far its generation grew while it was not being deleted (the API
    server bumps the generation once when it marks an object with finalizers for deletion)."""
    seen: dict[str, tuple[int, int]] = {}
    for feed in sampler.feeds:
        if feed.kind not in kinds:
            continue
        for version in list(feed.versions):
            meta = version.obj["metadata"]
            if version.deleted or meta.get("deletionTimestamp"):
                continue
            key, generation = f"{feed.kind}/{meta['name']}", int(meta.get("generation") or 0)
            low, high = seen.get(key, (generation, generation))
            seen[key] = (min(low, generation), max(high, generation))
    return {key: high - low for key, (low, high) in seen.items()}


def uids(sampler: GateSampler, kind: str) -> dict[str, str]:
    return {name: str(o["metadata"]["uid"]) for name, o in sampler.current(kind).items()}


def status_of(sampler: GateSampler, kind: str, name: str) -> dict[str, Any]:
    return dict((sampler.current(kind).get(name) or {}).get("status") or {})


def true_conditions(status: Mapping[str, Any]) -> set[str]:
    return {c["type"] for c in status.get("conditions") or [] if c.get("status") == "True"}


def cluster_of_job(sampler: GateSampler) -> str | None:
    return status_of(sampler, "RayJob", "job").get("rayClusterName") or None


def active_cluster(sampler: GateSampler) -> str | None:
    return (status_of(sampler, "RayService", "svc").get("activeServiceStatus") or {}).get("rayClusterName")


def serving(sampler: GateSampler) -> bool:
    status = status_of(sampler, "RayService", "svc")
    return bool(active_cluster(sampler)) and "Ready" in true_conditions(status)


def job_running(sampler: GateSampler) -> bool:
    status = status_of(sampler, "RayJob", "job")
    return status.get("jobDeploymentStatus") == "Running" and status.get("jobStatus") == "RUNNING"


def pods_running(sampler: GateSampler, cluster_name: str, count: int) -> bool:
    pods = [
        p
        for p in sampler.current("Pod").values()
        if (p["metadata"].get("labels") or {}).get("ray.io/cluster") == cluster_name
        and (p.get("status") or {}).get("phase") == "Running"
    ]
    return len(pods) == count


def pods_of(sampler: GateSampler, cluster_name: str) -> dict[str, str]:
    """name -> uid of the cluster's pods."""
    return {
        name: str(p["metadata"]["uid"])
        for name, p in sampler.current("Pod").items()
        if (p["metadata"].get("labels") or {}).get("ray.io/cluster") == cluster_name
    }


def first_look_missing(sampler: GateSampler, service_cluster: str) -> list[str]:
    """What rayquota has not stamped yet: Ray pods without its version, the RayService's cluster
    without the Serve config it applied."""
    missing = [
        f"pod {name} ({(p['metadata'].get('annotations') or {}).get('ray.io/kuberay-version')})"
        for name, p in sampler.current("Pod").items()
        if "ray.io/cluster" in (p["metadata"].get("labels") or {})
        and (p["metadata"].get("annotations") or {}).get("ray.io/kuberay-version") != RAYQUOTA_VERSION
    ]
    cluster = sampler.current("RayCluster").get(service_cluster) or {"metadata": {}}
    if "rayquota.io/serve-config-v2" not in (cluster["metadata"].get("annotations") or {}):
        missing.append(f"RayCluster {service_cluster}: no serve config recorded")
    return missing


def written_by(obj: Mapping[str, Any], manager: str, subresource: str = "status") -> bool:
    return any(
        entry.get("manager", "").startswith(manager) and entry.get("subresource", "") == subresource
        for entry in obj["metadata"].get("managedFields") or []
    )


def status_regressions(before: Mapping[str, Any], after: Mapping[str, Any], same: Sequence[str]) -> list[str]:
    """What went back between two statuses of one object: a field of ``same`` changed, a True
    condition is no longer True, observedGeneration went down."""
    found = [
        f"{key}: {before.get(key)!r} -> {after.get(key)!r}"
        for key in same
        if before.get(key) != after.get(key)
    ]
    lost = true_conditions(before) - true_conditions(after)
    if lost:
        found.append(f"conditions no longer True: {sorted(lost)}")
    if int(after.get("observedGeneration") or 0) < int(before.get("observedGeneration") or 0):
        found.append(
            f"observedGeneration {before.get('observedGeneration')} -> {after.get('observedGeneration')}"
        )
    return found


def status_writers(obj: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Who last wrote the object's status, and when (its managedFields), for a failure's message."""
    entries = [e for e in obj["metadata"].get("managedFields") or [] if e.get("subresource") == "status"]
    return sorted((str(e.get("time")), str(e.get("manager"))) for e in entries)


def versions_since(sampler: GateSampler, kind: str, name: str, revision: int) -> list[Mapping[str, Any]]:
    feed = next(f for f in sampler.feeds if f.kind == kind)
    return [
        v.obj
        for v in sorted(feed.versions, key=lambda v: v.revision)
        if v.revision > revision and not v.deleted and v.obj["metadata"]["name"] == name
    ]


def _set_worker_env(kubectl: Callable[..., Any], namespace: str) -> None:
    """The user's upgrade: the workers get an environment variable (a new cluster under NewCluster)."""
    path = "/spec/rayClusterConfig/workerGroupSpecs/0/template/spec/containers/0/env"
    patch = [{"op": "add", "path": path, "value": [{"name": "MIGRATED", "value": "1"}]}]
    kubectl("patch", "rayservice", "svc", "-n", namespace, "--type", "json", "-p", json.dumps(patch))


# --- the test -----------------------------------------------------------------------------------------

# What must not change while the operators hand over, per kind (besides conditions and generations).
CARRIED = {
    "RayCluster": ("state", "readyWorkerReplicas", "desiredWorkerReplicas", "availableWorkerReplicas"),
    "RayJob": ("jobDeploymentStatus", "jobStatus", "jobId", "rayClusterName", "startTime", "dashboardURL"),
    "RayService": ("serviceStatus", "activeServiceStatus.rayClusterName"),
}


def carried(kind: str, status: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in CARRIED[kind]:
        value: Any = status
        for part in key.split("."):
            value = (value or {}).get(part) if isinstance(value, Mapping) else None
        out[key] = value
    out["conditions"] = status.get("conditions")
    out["observedGeneration"] = status.get("observedGeneration")
    return out


@pytest.mark.timeout(1200)  # KubeRay, the handover, an upgrade, deletions and the way back
def test_running_kuberay_objects_move_to_rayquota_and_back(
    kuberay_cluster: LocalCluster, namespace: str, redis: RedisServer, heads: FakeHeads, tmp_path: Path
) -> None:
    cluster = kuberay_cluster
    kubectl = cluster.kubectl
    kubectl(
        "create",
        "secret",
        "generic",
        "redis-auth",
        f"--from-literal=password={redis.password}",
        "-n",
        namespace,
    )
    sampler = sampler_of(cluster, namespace)
    try:
        # --- under KubeRay ------------------------------------------------------------------------
        with kuberay(cluster, namespace, heads, tmp_path / "kuberay.log"):
            kubectl(
                "apply",
                "-f",
                "-",
                input=yaml.safe_dump_all(manifests(namespace, heads.dashboard_port, redis)),
            )
            job_cluster = wait_for("KubeRay's cluster for the RayJob", lambda: cluster_of_job(sampler), 90)
            heads.add(job_cluster)
            heads.head(job_cluster).jobs[JOB_ID] = {
                "submission_id": JOB_ID,
                "job_id": JOB_ID,
                "status": "RUNNING",
            }
            first = wait_for(
                "KubeRay's cluster for the RayService",
                lambda: (
                    (status_of(sampler, "RayService", "svc").get("pendingServiceStatus") or {}).get(
                        "rayClusterName"
                    )
                    or active_cluster(sampler)
                ),
                90,
            )
            heads.add(first, serving=True)
            wait_for("the RayService serving under KubeRay", lambda: serving(sampler), 120)
            wait_for("the RayJob running under KubeRay", lambda: job_running(sampler), 120)
            wait_for(
                "the RayCluster ready under KubeRay",
                lambda: status_of(sampler, "RayCluster", "rc").get("state") == "ready",
                120,
            )
            wait_for(
                "the submitter Job's pod running",
                lambda: any(
                    (p["metadata"].get("labels") or {}).get("job-name") == "job"
                    and (p.get("status") or {}).get("phase") == "Running"
                    for p in sampler.current("Pod").values()
                ),
                60,
            )
        under_kuberay = sampler.sync()
        objects = {kind: dict(sampler.current(kind)) for kind in ("RayCluster", "RayJob", "RayService")}
        before = {
            kind: {name: carried(kind, o.get("status") or {}) for name, o in items.items()}
            for kind, items in objects.items()
        }
        kept = {kind: uids(sampler, kind) for kind in ("Pod", "Service", "Job", "RayCluster")}
        rc_pods = pods_of(sampler, "rc")
        assert "ray.io/rayservice-finalizer" in objects["RayService"]["svc"]["metadata"]["finalizers"]
        assert "ray.io/rayjob-finalizer" in objects["RayJob"]["job"]["metadata"]["finalizers"]
        assert (
            "ray.io/gcs-ft-redis-cleanup-finalizer" in objects["RayCluster"][first]["metadata"]["finalizers"]
        )
        assert heads.serve_puts(first) >= 1

        # --- the migration: rayquota's CRDs, the chart, its operator -------------------------------
        _apply_crds(cluster, "ray.io_*.yaml")
        sampler = renewed(sampler, cluster, namespace)
        install = helm(
            "install", "rq", str(CHART), "-n", namespace, "--set", "webhooks.enabled=false",
            "--wait", "--timeout", "120s", cluster=cluster,
        )  # fmt: skip
        assert install.returncode == 0, install.stdout + install.stderr
        kubeconfig = service_account_kubeconfig(cluster, namespace, "rq-rayquota")
        log = tmp_path / "rayquota.log"
        with rayquota(kubeconfig, namespace, heads, log) as operator:
            wait_for(
                "rayquota's operator ready (its informers synced)",
                lambda: operator.poll() is None and "operator ready" in log.read_text(errors="replace"),
                180,
            )
            # rayquota has looked at every cluster once it has stamped their pods with its version
            # (as it does after an operator upgrade), and at the RayService once it has recorded
            # the Serve config it applied on the active cluster.
            try:
                wait_for(
                    "rayquota's first look at each object", lambda: not first_look_missing(sampler, first), 90
                )
            except AssertionError as exc:
                got = kubectl("get", "raycluster", first, "-n", namespace, "-o", "json", check=False)
                stored = got.stdout
                feeds = {f.kind: (f.newest, f.gaps, len(f.versions)) for f in sampler.feeds}
                raise AssertionError(
                    f"{exc}; not looked at: {first_look_missing(sampler, first)}; stored annotations: "
                    f"{(json.loads(stored or '{}').get('metadata') or {}).get('annotations')}; feeds: {feeds}"
                ) from None
            holds(
                "the objects as KubeRay left them",
                lambda: (
                    serving(sampler)
                    and job_running(sampler)
                    and status_of(sampler, "RayCluster", "rc").get("state") == "ready"
                ),
                STABLE_S,
            )
            sampler.sync()
            # The chart's own objects (the release "rq": its Deployment's pods) are the only new ones.
            now = {
                kind: {n: u for n, u in uids(sampler, kind).items() if not n.startswith("rq-rayquota")}
                for kind in kept
            }
            for kind, was in kept.items():
                assert now[kind] == was, f"{kind}s re-created or removed: {was} -> {now[kind]}"
            for kind, items in objects.items():
                for name in items:
                    for version in versions_since(sampler, kind, name, under_kuberay):
                        after = carried(kind, version.get("status") or {})
                        problems = status_regressions(before[kind][name], after, CARRIED[kind])
                        assert not problems, (
                            f"{kind} {name}'s status went back under rayquota: {problems} "
                            f"(status writers: {status_writers(version)})"
                        )
            growth = spec_growth(sampler, ("RayCluster", "RayService", "RayJob"))
            assert not any(growth.values()), f"generations grew without a user's change: {growth}"

            # --- a RayService upgrade under rayquota ------------------------------------------------
            _set_worker_env(kubectl, namespace)
            new = wait_for(
                "rayquota's new cluster for the upgrade",
                lambda: next(
                    (n for n in sampler.current("RayCluster") if n.startswith("svc-") and n != first), None
                ),
                60,
            )
            heads.add(new, serving=True)
            wait_for(
                "rayquota switching the RayService to the new cluster",
                lambda: active_cluster(sampler) == new,
                90,
            )
            wait_for(
                "the serve Service selecting the new cluster",
                lambda: (
                    (
                        (sampler.current("Service").get("svc-serve-svc") or {})
                        .get("spec", {})
                        .get("selector", {})
                    ).get("ray.io/cluster")
                    == new
                ),
                30,
            )
            assert uids(sampler, "Service")["svc-serve-svc"] == kept["Service"]["svc-serve-svc"]
            wait_for(
                "the old cluster deleted, its Redis cleanup done",
                lambda: (
                    first not in sampler.current("RayCluster")
                    and not any(
                        (p["metadata"].get("labels") or {}).get("ray.io/cluster") == first
                        for p in sampler.current("Pod").values()
                    )
                ),
                90,
            )
            assert heads.serve_puts(new) >= 1
            assert serving(sampler)

            # --- deletions under rayquota, KubeRay's finalizers on the objects ---------------------
            for kind, name in (("rayjob", "job"), ("rayservice", "svc")):
                kubectl("delete", kind, name, "-n", namespace, "--wait=false")
            wait_for(
                "the RayJob, the RayService and their clusters gone",
                lambda: (
                    not sampler.current("RayJob")
                    and not sampler.current("RayService")
                    and set(sampler.current("RayCluster")) == {"rc"}
                ),
                90,
            )
            growth = spec_growth(sampler, ("RayCluster", "RayService", "RayJob"))
            assert growth.get("RayService/svc") == 1, growth  # the user's one edit
            assert not any(g for key, g in growth.items() if key != "RayService/svc"), growth
            assert pods_of(sampler, "rc") == rc_pods
        helm("uninstall", "rq", "-n", namespace, "--wait", cluster=cluster)

        # --- the way back: KubeRay's CRDs and operator again ----------------------------------------
        again = kuberay_build()
        assert again is not None, build_hint(KUBERAY_VERSION)
        crds = str(again[1])
        kubectl("apply", "--server-side", "--force-conflicts", "-f", crds, timeout=240)
        sampler = renewed(sampler, cluster, namespace)
        back = sampler.sync()
        with kuberay(cluster, namespace, heads, tmp_path / "kuberay-again.log"):
            wait_for(
                "KubeRay's first status of the RayCluster again",
                lambda: any(
                    written_by(v, "kuberay") or written_by(v, "manager")
                    for v in versions_since(sampler, "RayCluster", "rc", back)
                ),
                60,
            )
            holds(
                "the RayCluster ready on its pods under KubeRay",
                lambda: (
                    status_of(sampler, "RayCluster", "rc").get("state") == "ready"
                    and pods_of(sampler, "rc") == rc_pods
                ),
                STABLE_S,
            )
            kubectl("delete", "raycluster", "rc", "-n", namespace, "--wait=false")
            wait_for("the RayCluster gone under KubeRay", lambda: not sampler.current("RayCluster"), 60)
        growth = spec_growth(sampler, ("RayCluster",))
        assert not growth.get("RayCluster/rc"), growth
    finally:
        sampler.close()
        helm("uninstall", "rq", "-n", namespace, cluster=cluster)
