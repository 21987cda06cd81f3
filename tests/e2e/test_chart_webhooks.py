"""The chart's webhook configurations, served by a locally running operator.

The chart points its configurations at a URL (`webhooks.url`); the operator runs with the
chart's ServiceAccount token, issues its own certificate for 127.0.0.1 into the chart's Secret,
patches the caBundle in, and serves the queue integration's handlers. The API server then calls
it for real: a queued RayJob is born suspended, a bad ClusterQueue is refused, clearing the gate
of a queued object or of a RayService's child is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from rayquota.localcluster.cluster import ClusterError, LocalCluster
from rayquota.ports import free_port
from tests.e2e.chart import REPO, service_account_kubeconfig
from tests.e2e.test_chart_install import (
    LocalOperator,
    Release,
    assert_ca_bundle_published,
    assert_only_declared_requests,
    declared_grants,
    install,
)
from tests.e2e.test_chart_install import releases as releases  # the fixture
from tests.polling import wait_for, wait_while_progressing
from tests.quota import QUEUE, Quota, get_json

pytestmark = pytest.mark.usefixtures("crds_installed")


@pytest.fixture
def user_namespace(control_plane: LocalCluster, namespace: str) -> Iterator[str]:
    """Where users' objects go: the webhooks never look at the operator's own namespace."""
    name = f"{namespace[:55]}-users"
    control_plane.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


def over_quota_rayjob(namespace: str) -> dict[str, Any]:
    """A RayJob on the queue asking for 16 GPUs of 8, written as if there were no queue."""
    worker = {
        "name": "ray-worker",
        "image": "rayproject/ray:2.41.0",
        "resources": {"limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "8"}},
    }
    head = {
        "name": "ray-head",
        "image": "rayproject/ray:2.41.0",
        "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "eager", "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "suspend": False,
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [head]}}},
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": 2,
                        "minReplicas": 0,
                        "maxReplicas": 2,
                        "rayStartParams": {},
                        "template": {"spec": {"containers": [worker]}},
                    }
                ],
            },
        },
    }


def refusal(cluster: LocalCluster, *args: str, input: str | None = None) -> str:
    """Run kubectl expecting the API server to refuse; return what it said."""
    with pytest.raises(ClusterError) as refused:
        cluster.kubectl(*args, input=input)
    return str(refused.value)


T = TypeVar("T")
# The operator's start-up is waited for while it progresses (LocalOperator.progress): at a load
# of 30 on 2 cores it had written nothing and sent no request after 90 s, importing.
STALL_S = 90
START_LIMIT_S = 600


def starting(operator: LocalOperator, what: str, probe: Callable[[], T | None]) -> T:
    return wait_while_progressing(
        what,
        probe,
        operator.progress,
        stall_s=STALL_S,
        limit_s=START_LIMIT_S,
        describe=lambda: f"the operator's log ends: {operator.log()[-3000:]}",
    )


# The API server's own words when a webhook did not answer (timed out, refused the connection).
NO_ANSWER = "failed calling webhook"


def wait_until_the_webhooks_answer(
    cluster: LocalCluster, manifest: str, operator: LocalOperator, timeout_s: float = 120
) -> dict[str, Any]:
    """A server-side dry run of ``manifest`` (through the webhooks, nothing stored), repeated
    while the API server says a webhook did not answer: the operator's first reviews come while
    it starts its reconciles, and on a loaded machine they can outlast the webhook timeout.
    Returns the object as the webhooks left it; any other refusal fails at once."""
    said: list[str] = []

    def answered() -> dict[str, Any] | None:
        result = cluster.kubectl(
            "apply", "--dry-run=server", "-o", "json", "-f", "-", input=manifest, check=False
        )
        if result.returncode == 0:
            return dict(json.loads(result.stdout))
        assert NO_ANSWER in result.stderr, result.stderr
        said.append(result.stderr.strip())
        return None

    try:
        return wait_for("the webhooks to answer a dry run", answered, timeout_s, interval_s=1.0)
    except AssertionError as timed_out:
        raise AssertionError(
            f"{timed_out}; {len(said)} dry runs not answered, the last: {said[-1:]}; "
            f"the operator's log ends: {operator.log()[-3000:]}"
        ) from None


def test_webhooks_served_by_the_operator_under_the_charts_account(
    control_plane: LocalCluster, namespace: str, user_namespace: str, releases: list[Release], tmp_path: Path
) -> None:
    cluster, users = control_plane, user_namespace
    quota = Quota(cluster, users)
    quota.create()  # before the webhooks exist: nothing serves them yet
    port = free_port()
    release = install(cluster, namespace, f"webhooks.url=https://127.0.0.1:{port}")
    releases.append(release)
    operator = LocalOperator(
        service_account_kubeconfig(cluster, namespace, release.fullname),
        namespace,
        tmp_path,
        watch=users,
        RAYQUOTA_WEBHOOK_LISTEN_PORT=str(port),
        RAYQUOTA_WEBHOOK_CERT_SECRET=f"{release.fullname}-webhook-cert",
        RAYQUOTA_WEBHOOK_HOSTS="127.0.0.1",
        RAYQUOTA_WEBHOOK_CONFIGURATIONS=release.fullname,
    )
    try:
        secret = starting(
            operator,
            "the operator to issue the webhook certificate",
            lambda: (
                (
                    s := get_json(cluster, "secret", f"{release.fullname}-webhook-cert", "-n", namespace)
                    or {}
                ).get("data")
                and s
            ),
        )
        assert_ca_bundle_published(cluster, release, secret, hosts=["127.0.0.1"])
        starting(operator, "the webhook server", lambda: "admission webhooks on" in operator.log())

        # Born suspended, by the mutating webhook, even though the manifest says otherwise.
        job = over_quota_rayjob(users)
        dry_run = wait_until_the_webhooks_answer(cluster, yaml.safe_dump(job), operator)
        assert dry_run["spec"]["suspend"] is True, dry_run["spec"]
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(job))
        stored = get_json(cluster, "rayjob", "eager", "-n", users) or {}
        assert stored["spec"]["suspend"] is True
        said = refusal(
            cluster,
            "patch",
            "rayjob",
            "eager",
            "-n",
            users,
            "--type=merge",
            "-p",
            '{"spec":{"suspend":false}}',
        )
        assert "is not admitted" in said and "rayquota explain rayjob/eager" in said

        # A bad ClusterQueue never lands, and the message names the field.
        bad = {
            "apiVersion": "rayquota.io/v1alpha1",
            "kind": "ClusterQueue",
            "metadata": {"name": f"{users[:50]}-bad"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "nvidia.com/gpu"],
                        # As many resources as covered (what the schema checks), not the same ones.
                        "flavors": [
                            {
                                "name": quota.flavor,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": 1},
                                    {"name": "memory", "nominalQuota": 1},
                                ],
                            }
                        ],
                    }
                ]
            },
        }
        said = refusal(cluster, "apply", "-f", "-", input=yaml.safe_dump(bad))
        assert "invalid ClusterQueue" in said and "spec.resourceGroups[0].flavors[0].resources" in said

        # A RayService over quota: its child cluster is born gated, and clearing that gate by
        # hand is refused (Kueue PR 11264's second hole).
        service = yaml.safe_load((REPO / "samples" / "ray-service.new-cluster.yaml").read_text())
        service["metadata"]["namespace"] = users
        group = service["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
        group["replicas"] = group["maxReplicas"] = 9  # 9 GPUs on a queue of 8
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(service))
        child = wait_for(
            "the RayService's child cluster",
            lambda: next(
                iter(
                    (
                        get_json(
                            cluster, "rayclusters", "-n", users, "-l", "ray.io/originated-from-crd=RayService"
                        )
                        or {}
                    ).get("items")
                    or []
                ),
                None,
            ),
            90,
        )
        assert child["spec"].get("suspend") is True
        name = child["metadata"]["name"]
        said = refusal(
            cluster,
            "patch",
            "raycluster",
            name,
            "-n",
            users,
            "--type=merge",
            "-p",
            '{"spec":{"suspend":false}}',
        )
        assert "does not cover it" in said, said
        after = get_json(cluster, "raycluster", name, "-n", users) or {}
        assert after["spec"]["suspend"] is True
        events = json.loads(cluster.kubectl("get", "events", "-n", users, "-o", "json").stdout)["items"]
        assert any(e["reason"] == "QuotaGateProtected" for e in events), [e["reason"] for e in events]
    finally:
        out = operator.stop()
        cluster.kubectl("delete", "rayservice,rayjob", "--all", "-n", users, "--wait=false", check=False)
        quota.delete()
    assert operator.proc.returncode == 0, out[-4000:]
    assert_only_declared_requests(operator, declared_grants(reconcilers=True, self_issued_cert=True), out)
