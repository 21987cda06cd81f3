"""GCS fault tolerance on a real Redis with a real Ray head.

The operator builds the head pod on the local control plane (a kwok fake); a real Ray head on
loopback then plays that pod, started with the pod's own env and the Redis flags of its generated
`ray start` command. Killing that head and starting it again must keep a detached actor, a Serve
application and a job record; deleting the RayCluster must bring the Redis cleanup Job, whose
command, run here against the same Redis, removes the cluster's keys and nothing else.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rayquota.localcluster.nodes import MANUAL_COMPLETION_LABEL
from rayquota.operator.config import OperatorConfig
from rayquota.operator.ray.dashboard_api.dashboard import JobSubmission, RayDashboardClient
from tests.integration.ray.kubehelpers import Kube, wait_for
from tests.integration.ray.podenv import container_env, start_flags
from tests.integration.ray.rayhead import RayHead
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.ray, pytest.mark.starts_ray_heads]

VENV_BIN = Path(sys.executable).parent
DEMO_APP = "rayquota.devtools.rayservice_demo_app:app"
# Ports are the loopback head's own (several heads share this host); everything else comes from the pod.
POD_ONLY_ENV = ("RAY_ADDRESS", "RAY_PORT")
REDIS_FLAGS = ("redis-password", "redis-username")


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kube(control_plane: Any, namespace: str, ray_operator: OperatorConfig) -> Kube:
    return Kube(control_plane, namespace)


def ft_cluster(name: str, redis: RedisServer, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "rayVersion": "2.60.0",
            "gcsFaultToleranceOptions": {
                "redisAddress": redis.address,
                "redisPassword": {"valueFrom": {"secretKeyRef": {"name": "redis-auth", "key": "password"}}},
            },
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {
                    # The cleanup Job's pod carries the head's labels: kwok leaves it to the test.
                    "metadata": {"labels": {MANUAL_COMPLETION_LABEL: "true"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "ray-head",
                                "image": "rayproject/ray:2.60.0",
                                "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
                            }
                        ]
                    },
                },
            },
            "workerGroupSpecs": [],
        },
    }


def create_redis_secret(kube: Kube, redis: RedisServer) -> None:
    kube.kubectl("create", "secret", "generic", "redis-auth", f"--from-literal=password={redis.password}")


def head_pod(kube: Kube, cluster: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        heads = [p for p in kube.pods(cluster) if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
        return heads[0] if heads else None

    return wait_for(f"the head pod of {cluster}", probe, 60)


def head_like_the_pod(kube: Kube, pod: dict[str, Any]) -> RayHead:
    container = pod["spec"]["containers"][0]
    env = container_env(kube, pod, container)
    flags = start_flags(env["KUBERAY_GEN_RAY_START_CMD"], REDIS_FLAGS, env)
    for name in POD_ONLY_ENV:
        env.pop(name, None)
    return RayHead(num_cpus=2, env=env, extra_args=flags)


def run_driver(head: RayHead, body: str, timeout_s: float = 180.0) -> str:
    """A Ray driver against the head's GCS, in its own process (it connects and leaves)."""
    script = textwrap.dedent(
        f"""
        import ray, time
        ray.init(address="127.0.0.1:{head.gcs_port}", namespace="ft-test", log_to_driver=False)
        """
    ) + textwrap.dedent(body)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout_s, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


DETACHED_ACTOR = """
@ray.remote(num_cpus=0, max_restarts=-1)
class Counter:
    def __init__(self):
        self.n = 0
    def incr(self):
        self.n += 1
        return self.n
counter = Counter.options(name="counter", lifetime="detached").remote()
print("count", ray.get(counter.incr.remote()))
"""

# After the new head is up, the actor is rescheduled once its old node is declared dead.
ACTOR_AGAIN = """
deadline = time.monotonic() + 150
while True:
    try:
        counter = ray.get_actor("counter")
        print("count", ray.get(counter.incr.remote(), timeout=10))
        break
    except Exception as exc:
        if time.monotonic() > deadline:
            raise
        time.sleep(2)
"""


def serve_config(http_port: int) -> dict[str, Any]:
    return {
        "http_options": {"host": "127.0.0.1", "port": http_port},
        "applications": [
            {
                "name": "greeter",
                "route_prefix": "/",
                "import_path": DEMO_APP,
                "args": {"message": "still here"},
            }
        ],
    }


def http_answer(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
            return resp.read().decode()
    except OSError:
        return None


async def deploy_and_submit(url: str, config: dict[str, Any], submission_id: str) -> None:
    async with RayDashboardClient(url, timeout_s=60) as dashboard:
        await dashboard.put_serve_applications(config)
        await dashboard.submit_job(
            JobSubmission("python -c \"print('job ran')\"", submission_id=submission_id)
        )


async def job_status(url: str, submission_id: str) -> str | None:
    async with RayDashboardClient(url, timeout_s=10) as dashboard:
        try:
            return str((await dashboard.get_job(submission_id)).status)
        except Exception:
            return None


def play_the_job_pod(
    kube: Kube, job: dict[str, Any], env_extra: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run the cleanup Job's container here, as its pod would (the pod itself is a kwok fake)."""
    pod = wait_for(
        "the cleanup Job's pod",
        lambda: next(iter(kube.list("pods", f"job-name={job['metadata']['name']}")), None),
        60,
    )
    container = pod["spec"]["containers"][0]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RAY_")},
        **container_env(kube, pod, container),
    }
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env.update(env_extra)
    result = subprocess.run(
        [*container["command"], *container["args"]], capture_output=True, text=True, timeout=180, env=env
    )
    finished = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    phase, reason = ("Succeeded", "Completed") if result.returncode == 0 else ("Failed", "Error")
    terminated = {
        "exitCode": result.returncode,
        "reason": reason,
        "startedAt": finished,
        "finishedAt": finished,
    }
    kube.patch_status(
        "pod",
        pod["metadata"]["name"],
        {
            "status": {
                "phase": phase,
                "containerStatuses": [
                    {
                        "name": container["name"],
                        "image": container["image"],
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {"terminated": terminated},
                    }
                ],
            }
        },
    )
    return result


def test_actor_serve_app_and_job_survive_the_head_and_deletion_cleans_redis(
    kube: Kube, redis: RedisServer
) -> None:
    create_redis_secret(kube, redis)
    redis.cli_run("SET", "another-cluster@sentinel", "kept")
    kube.apply(ft_cluster("ft-cluster", redis))
    pod = head_pod(kube, "ft-cluster")
    cluster = kube.get("raycluster", "ft-cluster")
    assert cluster is not None
    assert "ray.io/gcs-ft-redis-cleanup-finalizer" in cluster["metadata"]["finalizers"]
    storage_namespace = pod["metadata"]["annotations"]["ray.io/external-storage-namespace"]
    assert storage_namespace == cluster["metadata"]["uid"]

    head = head_like_the_pod(kube, pod)
    assert any(
        flag.startswith("--redis-password=") and flag != "--redis-password=" for flag in head.extra_args
    )
    head.start(timeout_s=180)
    try:
        assert redis.keys(f"*{storage_namespace}*"), "the head keeps no GCS tables in Redis"
        assert "count 1" in run_driver(head, DETACHED_ACTOR)
        http_port = head.serve_port  # the local head starts Serve there; the config's port must match
        asyncio.run(deploy_and_submit(head.dashboard_url, serve_config(http_port), "ft-job"))
        wait_for("the Serve application answers", lambda: http_answer(http_port) == "still here", 180)
        wait_for(
            "the job SUCCEEDED",
            lambda: asyncio.run(job_status(head.dashboard_url, "ft-job")) == "SUCCEEDED",
            120,
        )

        head.restart(timeout_s=180)  # SIGKILL everything, then a new head with the same env

        assert "count" in run_driver(head, ACTOR_AGAIN, timeout_s=240)
        assert asyncio.run(job_status(head.dashboard_url, "ft-job")) == "SUCCEEDED"
        wait_for("the Serve application answers again", lambda: http_answer(http_port) == "still here", 240)
    finally:
        head.stop()

    kube.kubectl("delete", "raycluster", "ft-cluster", "--wait=false")
    job = wait_for("the Redis cleanup Job", lambda: kube.get("job", "ft-cluster-redis-cleanup"), 60)
    assert job["metadata"]["labels"]["ray.io/node-type"] == "redis-cleanup"
    # The cluster waits for its Job: the finalizer holds it.
    assert kube.get("raycluster", "ft-cluster") is not None
    result = play_the_job_pod(kube, job, {})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert redis.keys(f"*{storage_namespace}*") == []
    assert redis.cli_run("GET", "another-cluster@sentinel").stdout.strip() == "kept"
    wait_for("the RayCluster gone", lambda: kube.get("raycluster", "ft-cluster") is None, 60)
    # Events are written beside the reconcile: the last may land after the cluster is gone.
    wanted = {"CreatedRedisCleanupJob", "RedisCleanupCompleted"}
    wait_for(
        f"events {sorted(wanted)}", lambda: wanted <= {e["reason"] for e in kube.events("ft-cluster")}, 30
    )


def test_a_cleanup_that_never_finishes_lets_the_cluster_go_after_the_timeout(
    kube: Kube, redis: RedisServer
) -> None:
    create_redis_secret(kube, redis)
    kube.apply(ft_cluster("ft-stuck", redis, **{"ray.io/gcs-ft-deletion-timeout": "5"}))
    head_pod(kube, "ft-stuck")
    kube.kubectl("delete", "raycluster", "ft-stuck", "--wait=false")
    wait_for("the Redis cleanup Job", lambda: kube.get("job", "ft-stuck-redis-cleanup"), 60)
    # Its pod never finishes (a kwok fake): the timeout lets the cluster go, with a Warning.
    wait_for("the RayCluster gone", lambda: kube.get("raycluster", "ft-stuck") is None, 60)
    # The event is written after the deletion it tells of (the operator's event writer may lag).
    stuck = "ForceDeletedStuckCluster"
    events = kube.events_once("ft-stuck", lambda es: any(e["reason"] == stuck for e in es))
    [event] = [e for e in events if e["reason"] == stuck]
    assert event["type"] == "Warning" and "may need cleaning by hand" in event["message"]


def test_an_invalid_fault_tolerance_spec_gets_no_finalizer_and_says_why(
    kube: Kube, redis: RedisServer
) -> None:
    body = ft_cluster("ft-rocksdb", redis)
    body["spec"]["gcsFaultToleranceOptions"] = {"backend": "rocksdb"}
    kube.apply(body)

    def refused() -> dict[str, Any] | None:
        cluster = kube.get("raycluster", "ft-rocksdb")
        reason = ((cluster or {}).get("status") or {}).get("reason") or ""
        return cluster if "backend 'rocksdb'" in reason else None

    cluster = wait_for("the spec refused", refused, 60)
    assert "ray.io/gcs-ft-redis-cleanup-finalizer" not in (cluster["metadata"].get("finalizers") or [])
    assert kube.pods("ft-rocksdb") == []
    assert json.dumps(kube.events("ft-rocksdb")).count("InvalidRayClusterSpec") >= 1
