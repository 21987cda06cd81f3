"""KubeRay's operator and ours, side by side, on the same manifests; prints the differences.

    .venv/bin/python benchmarks/kuberay_side_by_side.py [--out docs/kuberay-compatibility.md] [--keep]
        [--cluster-prefix parity]

Two local control planes (`<prefix>-kuberay`, `<prefix>-rayquota`): KubeRay's CRDs and its operator
(v1.6.2, built with `go install` and cached like the other binaries, its RayCronJob gate on) in the
first, our CRDs and `rayquota run` in the second. The same manifests are applied to both: KubeRay's
samples ray-cluster.complete.yaml, ray-cluster.autoscaler.yaml and ray-job.sample.yaml (read from
the Go module cache) and ours in OUR_SAMPLES. They are created without kubectl's client-side schema
check, so a field v1.6.2's CRDs lack is pruned by its API server (and shows as a difference)
instead of failing the creation. When both sides have settled, every object of COLLECTED in the
namespace is normalised (benchmarks/parity_diff.py) and compared field by field. Each difference
is matched against KNOWN_DIFFERENCES, which says why it is deliberate; anything unmatched is
reported as UNEXPLAINED and makes the script exit 1.

Not part of `make test`: it builds KubeRay's operator (minutes, once) and runs two clusters.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness
from benchmarks.harness import PeerProcess
from benchmarks.parity_diff import Difference, KnownDifference, compare, explain
from rayquota.localcluster import binaries, peers
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.install import install_crds
from rayquota.localcluster.paths import repo_root
from rayquota.ports import free_port

NAMESPACE = "parity"
KUBERAY_SAMPLES = ("ray-cluster.complete.yaml", "ray-cluster.autoscaler.yaml", "ray-job.sample.yaml")
OUR_SAMPLES = (
    "samples/parity/ray-cluster.multi-host-gpu.yaml",
    "samples/parity/ray-cluster.recreate.yaml",
    "samples/ray-job.http-mode.yaml",
    "samples/ray-cluster.auth-token.yaml",
    "samples/ray-cluster.autoscaler-v2.yaml",
    "samples/ray-cluster.gcs-ft-redis.yaml",
    "samples/ray-cluster.ingress.yaml",
    "samples/ray-service.custom-serve-service.yaml",
    "samples/ray-cronjob.yaml",
)
COLLECTED = (
    "pods",
    "services",
    "jobs.batch",
    "serviceaccounts",
    "roles",
    "rolebindings",
    "rayclusters",
    "rayjobs",
    "rayservices",
    "raycronjobs",
    "secrets",
    "ingresses.networking.k8s.io",
)
# KubeRay's RayCronJob controller is alpha and off unless its gate is on.
KUBERAY_FEATURE_GATES = "RayCronJob=true"
# Labels that belong to rayquota's queueing, not to KubeRay's manifests.
STRIPPED_LABELS = ("rayquota.io/queue-name",)
SETTLE_TIMEOUT_S = 240.0
SETTLE_QUIET_S = 10.0

# Why each remaining difference is deliberate. Matched (regex) against "Kind/name.path".
KNOWN_DIFFERENCES = (
    KnownDifference(
        r"\.metadata\.annotations\.ray\.io/kuberay-version|RAY_USAGE_STATS_EXTRA_TAGS",
        "The operator's own version; ours reports rayquota's.",
    ),
    KnownDifference(
        r"Pod/.*\.metadata\.annotations(\.ray\.io/(hash-without-replicas-and-workers-to-delete|"
        r"upgrade-strategy-recreate-hash))?$",
        "The Recreate strategy's spec digest: KubeRay stamps `ray.io/upgrade-strategy-recreate-hash` on "
        "the head; we stamp our own digest and version on every pod (a cluster whose head is gone still "
        "knows which spec its workers came from). Each operator only compares its own stamps.",
    ),
    KnownDifference(
        r"env\[name=KUBERAY_GEN_AUTOSCALER_START_CMD\]",
        "From KubeRay's next release (master): the generated autoscaler command, so custom "
        "`autoscalerOptions.args` can run it.",
    ),
    KnownDifference(
        r"initContainers\[name=wait-gcs-ready\]\.args",
        "Our own wording of the same loop: `ray health-check` against the head Service every 5 s, "
        "quiet for two minutes, then showing the check's errors.",
    ),
    KnownDifference(
        r"(Job|Pod)/.*containers\[name=ray-job-submitter\]\.args",
        "Our submit script: the same steps (submit once with a fixed submission id unless `ray job "
        "status` finds it, then `ray job logs --follow`) in our own wording, after waiting for the GCS "
        "health endpoint as KubeRay master does (v1.6.2 submits at once and may burn a Job retry).",
    ),
    KnownDifference(
        r"\.status\.conditions\[type=[A-Za-z]+\]\.observedGeneration",
        "Our conditions record the generation they were computed from (the metav1.Condition "
        "convention); KubeRay leaves it unset.",
    ),
    KnownDifference(
        r"\.status\.(reason|message)$|\.status\.conditions\[type=[A-Za-z]+\]\.(message|reason)",
        "Human-readable messages are our own words.",
    ),
    KnownDifference(
        r"\.spec\..*template\.(metadata$|spec\.containers\[name=[^]]+\]\.ports\[name=[^]]+\]\.protocol)"
        r"|\.workerGroupSpecs\[groupName=[^]]+\]\.scaleStrategy$",
        "Defaults the API server writes into the stored object: KubeRay's CRD embeds Kubernetes' whole "
        "PodTemplateSpec schema (so `protocol: TCP`, `metadata: {}` are filled in); ours keeps pod "
        "templates schemaless (a far smaller CRD). The same defaults land on the pods when they are "
        "created, so the pods are identical.",
    ),
    KnownDifference(
        r"RayJob/.*\.status\.(failed|succeeded|jobStatus|rayJobInfo)$",
        "KubeRay writes zero counters, an empty job status and empty job info before the job runs; "
        "we leave out what is not known yet.",
    ),
    KnownDifference(
        r"RayJob/.*\.status\.rayClusterStatus",
        "A copy of the RayCluster's status taken at a different moment: KubeRay's is refreshed when the "
        "RayJob changes state, ours on every reconcile.",
    ),
    KnownDifference(
        r"RayJob/.*\.status\.jobStatusCheckFailureStartTime",
        "From KubeRay's next release (master): when the dashboard's job status stopped answering "
        "(JobStatusCheckTimeoutExceeded after 300 s). Neither cluster here can reach a dashboard.",
    ),
    KnownDifference(
        r"(Pod/.*|Job/.*\.spec\.template)\.metadata\.labels\.ray\.io/job-submitter",
        "The queue integration counts the submitter's pod as its own pod set and finds it by this "
        "label; KubeRay's submitter pods carry only the Job controller's labels.",
    ),
    KnownDifference(
        r"(Pod/.*|Job/.*\.spec\.template)\.metadata\.labels\."
        r"(ray\.io/originated-from-cr-name|ray\.io/originated-from-crd|app\.kubernetes\.io/created-by)",
        "KubeRay v1.7.0 labels the submitter's pod template with the RayJob's name, its kind and the "
        "operator (so a NetworkPolicy admits the submitter by them); v1.6.2 put them on the Job only. "
        "We follow v1.7.0.",
    ),
    KnownDifference(
        r"Service/.*-headless\.metadata\.labels\.ray\.io/cluster",
        "Our Service cache selects on `ray.io/cluster`, so the multi-host headless Service carries it "
        "besides KubeRay's `ray.io/headless-worker-svc`.",
    ),
    KnownDifference(
        r"\.status\.lastUpdateTime|\.status\.observedGeneration",
        "Written when the status changes; timing differs between operators.",
    ),
    KnownDifference(
        r"RayCluster/.*\.headGroupSpec\.ingressOptions$|Ingress/.*\.spec\.(rules|tls)$",
        "`headGroupSpec.ingressOptions` (host, path, pathType, TLS) is new in KubeRay v1.7.0: v1.6.2's CRD "
        "prunes it, so v1.6.2 builds its default Ingress (no host, path `/<cluster>/(.*)`, no TLS); "
        "ours applies the options as v1.7.0's Ingress builder does. Everything else on the Ingress is "
        "the same.",
    ),
    KnownDifference(
        r"RayCluster/.*\.metadata\.annotations\.ray\.io/hash-without-replicas-and-workers-to-delete$",
        "A RayService stamps its cluster with a digest of the cluster spec to notice a changed spec; "
        "each operator computes and compares only its own.",
    ),
    KnownDifference(
        r"RayCronJob/.*\.spec\.timeZone$",
        "`timeZone` is new in KubeRay v1.7.0's RayCronJob: v1.6.2's CRD prunes it.",
    ),
    KnownDifference(
        r"Secret/.*\.data\.auth_token$",
        "The token for `authOptions.mode: token` is random: each operator generates its own (same "
        "Secret name, key, labels and owner).",
    ),
    KnownDifference(
        r"RayService/.*\.spec\.serveService\.(spec\.ports\[name=[^]]+\]\.(protocol|targetPort)|status)$",
        "KubeRay's CRD embeds Kubernetes' Service schema (the API server fills `protocol: TCP`), and "
        "v1.6.2 adds its finalizer by writing the whole RayService back through its Go types, which "
        "stores zero values (`targetPort: 0`, `status.loadBalancer: {}`) into `serveService` and "
        "bumps the generation. Ours keeps the user's `serveService` as written; the Services both "
        "operators create from it are the same.",
    ),
    KnownDifference(
        r"RayService/.*\.status\.(activeServiceStatus|pendingServiceStatus\.rayClusterStatus)",
        "A copy of each cluster's status taken at a different moment (no Ray head answers in this "
        "run): KubeRay's pending copy is the new cluster's empty status, and it writes an empty "
        "status for an active cluster that does not exist yet; ours copies the pending cluster's "
        "status on every reconcile and leaves out the active side until there is one.",
    ),
    KnownDifference(
        r"RayService/.*\.status\.numServeEndpoints$",
        "We write the count of serving endpoints also when it is 0; KubeRay omits a zero.",
    ),
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- manifests ------------------------------------------------------------------------------------


def manifests() -> list[dict[str, Any]]:
    kuberay_samples = (
        peers.module_cache_path(peers.KUBERAY_MODULE, peers.KUBERAY_VERSION) / "config" / "samples"
    )
    paths = [kuberay_samples / name for name in KUBERAY_SAMPLES]
    paths += [repo_root() / name for name in OUR_SAMPLES]
    docs: list[dict[str, Any]] = []
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            labels = doc.get("metadata", {}).get("labels") or {}
            for key in STRIPPED_LABELS:
                labels.pop(key, None)
            doc["metadata"]["namespace"] = NAMESPACE
            docs.append(doc)
    return docs


def apply_all(cluster: LocalCluster, docs: list[dict[str, Any]]) -> None:
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    text = "\n---\n".join(yaml.safe_dump(d) for d in docs)
    # Created, not server-side applied (which refuses a field the schema lacks), without the
    # client's check: a field the peer's CRDs lack is pruned by its API server, as for a user.
    cluster.kubectl("create", "--validate=false", "-f", "-", input=text)


def snapshot(cluster: LocalCluster) -> list[dict[str, Any]]:
    out = cluster.kubectl("get", ",".join(COLLECTED), "-n", NAMESPACE, "-o", "json").stdout
    items = json.loads(out)["items"]
    # The namespace's own default ServiceAccount and kube-root CA objects are Kubernetes', not ours.
    return [i for i in items if not (i["kind"] == "ServiceAccount" and i["metadata"]["name"] == "default")]


def settled(cluster: LocalCluster) -> list[dict[str, Any]]:
    """Poll until nothing the operator decides has changed for SETTLE_QUIET_S."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    last: str | None = None
    quiet_since = time.monotonic()
    while True:
        items = snapshot(cluster)
        fingerprint = json.dumps(sorted(repr(sorted(compare_view(i).items())) for i in items))
        if fingerprint != last:
            last, quiet_since = fingerprint, time.monotonic()
        elif time.monotonic() - quiet_since >= SETTLE_QUIET_S:
            return items
        if time.monotonic() > deadline:
            log(f"{cluster.name}: still changing after {SETTLE_TIMEOUT_S:.0f}s; comparing what is there")
            return items
        time.sleep(1.0)


def compare_view(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    status = {k: v for k, v in (obj.get("status") or {}).items() if k not in ("lastUpdateTime",)}
    return {"kind": obj["kind"], "name": meta["name"], "labels": meta.get("labels"), "status": status}


# --- report ---------------------------------------------------------------------------------------

HEADER = """# KubeRay compatibility

Generated by `benchmarks/kuberay_side_by_side.py`: KubeRay's operator {version} and rayquota were
run side by side on two local control planes with the same manifests ({manifests}), and
everything each created was compared field by field after normalising generated names, uids,
timestamps and IPs, and treating `ulimit -n ${{RAY_START_ULIMIT_OPEN_FILES:-65536}}` (KubeRay
master's spelling, which we use) as v1.6.2's `ulimit -n 65536`. Every remaining difference is
listed with the reason it is deliberate.

Every spec field of KubeRay v1.7.0's RayCluster, RayJob, RayService and RayCronJob types is kept by
our CRDs and either implemented, refused or warned on the object; none is ignored silently
(`tests/unit/api/test_kuberay_field_walk.py` walks v1.7.0's fields, listed by
`tools/kuberay_spec_fields.py`, against our models and the operator's code, over full paths: a
field counts as read only where the operator reads it inside its parent, so the cluster-wide
`autoscalerOptions.idleTimeoutSeconds` no longer passes on the worker groups' field of that name). A
RayCronJob's `spec.jobTemplate` becomes each of its RayJobs' spec unchanged, so a template field is
implemented, refused or warned exactly as the RayJob field is, and a warned field set in a template
is also named on the RayCronJob (e.g. `spec.jobTemplate.rayClusterSpec.headGroupSpec.ingressOptions`).
Fields we keep but do not act on, with a Warning event `UnimplementedField` on the object when set:
`headGroupSpec.ingressOptions` without `enableIngress` (KubeRay reads it only with it too),
`serveService` on a RayService with `NewClusterWithIncrementalUpgrade` (KubeRay does not use it
there either), and RayService's `serviceUnhealthySecondThreshold` and
`deploymentUnhealthySecondThreshold` (deprecated and ignored by KubeRay too).

**Fail closed.** A spec that asks for security rayquota does not provide never runs without it. Refused
wherever a RayCluster spec is written (RayCluster, RayJob `rayClusterSpec`, RayService
`rayClusterConfig`, RayCronJob template), naming the field and why: `networkPolicy`, `tlsOptions`
(any value, even `enabled: false`) and `historyServerOptions` (KubeRay v1.7.0 refuses the same with
its default feature gates `RayClusterNetworkPolicy`, `RayClusterMTLS`, `RayClusterHistoryServer`
off, and rayquota refuses those gates turned on), and `authOptions.enableK8sTokenAuth: true`
(KubeRay implements it on a token-mode RayCluster and refuses it on a RayJob or RayService, without
`mode: token` or with `secretName`; rayquota does not implement it, so it is refused everywhere,
with KubeRay's reason first where KubeRay refuses it too). The reconcilers refuse them
(RayCluster: `InvalidRayClusterSpec` event and `ReplicaFailure`/`ValidationFailed`, nothing created;
RayJob: `ValidationFailed`; RayService: `Ready=False`/`ValidationFailed`; RayCronJob:
`InvalidRayCronJobSpec`), and the admission webhook refuses a queued object asking for them at
creation and update. Token auth with the Secret's token (`authOptions.mode: token`) is implemented.
Also refused with an error naming the field: `gcsFaultToleranceOptions.backend: rocksdb` and
`.storage` (KubeRay's embedded GCS store, behind a feature gate that is off by default),
`deletionStrategy` `DeleteWorkers` on a RayJob whose cluster autoscales (KubeRay's rule and message,
at admission by the CRD), and the RayService annotation `ray.io/initializing-timeout` (not
implemented: a service not ready in time would not be failed and cleaned up; a malformed value gets
KubeRay's reason).

**Validation as KubeRay v1.7.0's.** The legacy `deletionStrategy.onSuccess`/`onFailure` (both, as
KubeRay requires) go with `shutdownAfterJobFinishes: true`, except with a `DeleteNone` policy;
`deletionRules` do not; `ttlSecondsAfterFinished` above 0 needs `shutdownAfterJobFinishes: true`.
`ValidationFailed` is terminal for a RayJob, as in KubeRay: a spec made valid again does not start
it (delete and re-create it). A RayService may not name its head Service, and
`NewClusterWithIncrementalUpgrade` needs `rayClusterConfig.enableInTreeAutoscaling: true` ("Ray
Autoscaler is required for NewClusterWithIncrementalUpgrade"). The CRDs carry KubeRay's rules on
`managedBy` (one of `ray.io/kuberay-operator` or `kueue.x-k8s.io/multikueue`, immutable) and on
`gcsFaultToleranceOptions.backend` (immutable).

**The cluster's own names.** The head's address in the pods (`FQ_RAY_IP`, `RAY_IP`, `RAY_ADDRESS`,
`--address`, the `wait-gcs-ready` check), the operator's dashboard URL, the Ingress backend and
`status.head.serviceName` use the head Service's actual name
(`headGroupSpec.headService.metadata.name` when set) and the cluster domain from KubeRay's
`CLUSTER_DOMAIN` setting (default `cluster.local`; rayquota's former `RAYQUOTA_CLUSTER_DOMAIN` is
refused at start-up with the new name).

**KubeRay's operator settings and annotations.** Every environment variable KubeRay v1.7.0's
operator reads is honoured or refused at start-up with its name, value and what rayquota does
instead (`rayquota/operator/kuberay_env.py`): honoured `CLUSTER_DOMAIN` and
`ENABLE_GCS_FT_REDIS_CLEANUP`; accepted when they ask for what rayquota does (KubeRay's defaults),
refused otherwise: `ENABLE_INIT_CONTAINER_INJECTION=false`, `ENABLE_PROBES_INJECTION=false`,
`ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE=true`, any `RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV`,
`ENABLE_RANDOM_POD_DELETE=true`, `RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS` and
`RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS` other than 300,
`DELETE_RAYJOB_CR_AFTER_JOB_FINISHES=true`, `ENABLE_ZERO_DOWNTIME=false`,
`USE_INGRESS_ON_OPENSHIFT=false` (no OpenShift Route is made), `ENABLE_LOGIN_SHELL=true`,
`ENABLE_DETERMINISTIC_HEAD_POD_NAME=true` and `ENABLE_WEBHOOKS=true`. The annotation
`ray.io/disable-provisioned-head-restart: "true"` is honoured: once the RayCluster was provisioned,
a lost head pod is not re-created (the cluster's status says why it waits). As in KubeRay, a
SidecarMode RayJob sets it on the RayCluster it creates, over any value on the RayJob (the
submitter runs in the head pod, and a new head would not run the job again); the other modes copy
the RayJob's value like any annotation.

**Migration from KubeRay.** KubeRay's finalizers are handled: `ray.io/rayjob-finalizer` (the Ray
job is stopped, then the finalizer removed), `ray.io/gcs-ft-redis-cleanup-finalizer` (the Redis
cleanup Job runs, or the finalizer is removed when GCS fault tolerance is off), and
`ray.io/rayservice-finalizer` (removed on deletion; the RayService's clusters are owned and go with
it).
Implemented since the first run (2026-11-22) and compared in the run below, each with its sample:
GCS fault tolerance on Redis (`gcsFaultToleranceOptions`; the cleanup Job runs on deletion only, so
it is not compared), token auth (`authOptions.mode: token`), Autoscaler v2, the head Ingress
(`headGroupSpec.enableIngress`), RayService `serveService` and RayCronJob. KubeRay v1.6.2 has all
of these; of the samples' fields it lacks only v1.7.0's `headGroupSpec.ingressOptions` and
RayCronJob `timeZone`, which its CRDs prune (the differences below say so). Fields read by the Ray
autoscaler itself from the RayCluster (`workerGroupSpecs[].priority`,
`autoscalerOptions.upscalingMode`, `autoscalerOptions.idleTimeoutSeconds`) work unchanged. Some
fields and behaviours come from KubeRay's
next release rather than {version} (`preRunningDeadlineSeconds` is in {version};
`autoscalerOptions.command/args`, `ingressOptions`, `networkPolicy`, `tlsOptions`,
`historyServerOptions`, `workerGroupSpecs[].priority`, `JobStatusCheckTimeoutExceeded`,
`RAY_START_ULIMIT_OPEN_FILES`, `KUBERAY_GEN_AUTOSCALER_START_CMD` and the K8sJobMode submitter
waiting for the GCS are on KubeRay's master branch).

## Differences by design (not shown by the run below)

- **Worker-group `suspend` on a `Recreate` cluster**: KubeRay's Recreate hash includes each
  group's `suspend`, so suspending one group deletes every pod of the cluster, head included, and
  starts it again. Ours leaves `suspend` out of the hash (like replicas and workersToDelete):
  suspending a group removes that group's pods only and the head keeps running. Restarting the head
  loses every running Ray job and actor for a change that only asked to remove some workers.
- **`app.kubernetes.io/created-by`** is `kuberay-operator` (KubeRay's value) so existing selectors
  keep working; set `RAYQUOTA_CREATED_BY_LABEL` to change it. Unlike KubeRay, a pod template cannot
  override it, because it is how the operator finds its own pods.
- **Finalizers, requeue timing, Events** are the operator core's business (issue 7), not compared.
- **RayCluster status writes while pods move**: progress (pods coming up one by one) is written at
  most every 5 s per cluster, where KubeRay writes each step; a new state, a failure and the status
  that ends a change (the head and every desired worker ready and running) are written at once, so
  a cluster settles as fast as under KubeRay (tests/integration/ray/test_raycluster_settle.py).

{crd_schemas}## RayCronJob (KubeRay v1.6+; checked against v1.7.0's source by reading)

In the side-by-side run as an object only: samples/ray-cronjob.yaml runs nightly, so neither
operator creates a RayJob during the run (KubeRay's with its RayCronJob gate on). Its runs are
checked against v1.7.0's source instead: v1.6.2's RayCronJob names its RayJobs with a random suffix
and records the time it ran rather than the run's scheduled time, both changed in v1.7.0, which is
what we follow. Every field of v1.7.0's type is implemented: `spec.jobTemplate` (a RayJob spec,
validated as a RayJob's), `spec.schedule`, `spec.timeZone`, `spec.suspend`,
`status.lastScheduleTime`, and its `kubectl get` columns (schedule, timezone, last schedule, age,
suspend).

- **Runs as v1.7.0 makes them**: the run due is the first after `lastScheduleTime` (before any,
  after the object's creation); its RayJob is `<name>-<minutes since the epoch of the run>`,
  labelled `ray.io/cronjob-name`, annotated `ray.io/cronjob-scheduled-timestamp` (the run's time,
  RFC 3339 UTC), owned by the RayCronJob (controller reference, so deleting it deletes its
  RayJobs); an AlreadyExists for that name counts as the run done. Runs missed while the operator
  was down or the RayCronJob was suspended are each created in turn, oldest first, as v1.7.0
  does; a `MissedSchedules` Warning event says how many are still due.
- **Schedule syntax**: robfig/cron's standard parser's (five fields, names, ranges, steps, `?`,
  `@yearly` ... `@hourly`, `@every <Go duration>`), read with croniter, which also accepts a few
  forms robfig refuses (`L`, `#`, day of week `7`); daylight-saving edges follow croniter. Without
  `timeZone`, the operator's local zone ($TZ, else /etc/localtime, else UTC), as KubeRay.
- **Refused by the API server at creation** (v1.7.0 refuses them only in its reconciler, with an
  event): a name over 36 characters, `TZ`/`CRON_TZ` in the schedule, an empty `timeZone`. The
  rest of v1.7.0's rules (the schedule parses, the zone exists, the template is a valid RayJob)
  give the same `InvalidRayCronJobSpec` Warning event as KubeRay, naming the field and value.
- **Under the queue** (Kueue's way with CronJobs): the RayCronJob is never queued; each RayJob
  carries the RayCronJob's queue and priority-class labels (KubeRay copies no labels; no other
  label is copied, so a GitOps tool's tracking label does not claim the runs) and is queued on
  its own.
- **Feature gate**: KubeRay's `RayCronJob` gate (alpha, off by default in KubeRay) is read; in
  rayquota it is on unless set to false.
- Events of our own besides KubeRay's two (`InvalidRayCronJobSpec`, `SuspendedRayCronJob`):
  `CreatedRayJob` and `MissedSchedules`.

"""


@dataclass(frozen=True)
class RunInfo:
    started: dt.datetime
    commit: str
    command: str


def git_commit() -> str:
    """The commit the run measured, marked `+dirty` when the work tree had changes."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo_root()), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    return git("rev-parse", "--short=12", "HEAD") + ("+dirty" if git("status", "--porcelain") else "")


DOC = Path(__file__).resolve().parents[1] / "docs" / "kuberay-compatibility.md"
CRD_SECTION = ("## The CRD schemas against KubeRay's", "<!-- crd-allow-list:end -->\n\n")
BY_HAND_SECTION = ("<!-- by-hand:start -->", "<!-- by-hand:end -->\n\n")


def kept_section(markers: tuple[str, str]) -> str:
    """The doc's text from the first marker to the end of the second, or "" when it has none."""
    text = DOC.read_text(encoding="utf-8")
    start, end = markers
    if start not in text:
        return ""
    section = text[text.index(start) :]
    return section[: section.index(end) + len(end)]


def crd_schemas_section() -> str:
    """The doc's section on the CRD schemas, kept as it is: the allow-list of
    tests/unit/api/test_crds_against_kuberay.py lives there, not in this run's output."""
    return kept_section(CRD_SECTION)


def by_hand_section() -> str:
    """The doc's records of runs made by hand against KubeRay v1.7.0 (this script with
    --kuberay-binary, benchmarks/kuberay_network_policy.py), kept as they are: `make test` does
    not build v1.7.0, so no run of the pinned peer can write them again."""
    return kept_section(BY_HAND_SECTION)


def report(
    explained: list[tuple[Difference, str]],
    docs: list[dict[str, Any]],
    info: RunInfo,
    version: str = peers.KUBERAY_VERSION,
) -> str:
    names = ", ".join(sorted({f"{d['kind']} {d['metadata']['name']}" for d in docs}))
    header = HEADER.format(version=version, manifests=names, crd_schemas=crd_schemas_section())
    lines = [header + by_hand_section()]
    unexplained = [d for d, reason in explained if not reason]
    lines.append(
        f"## Result of the last run\n\n"
        f"Run {info.started:%Y-%m-%d %H:%M} UTC at commit `{info.commit}`: `{info.command}`.\n\n"
        f"{len(explained)} differences, {len(unexplained)} unexplained.\n"
    )
    by_reason: dict[str, list[Difference]] = {}
    for difference, reason in explained:
        by_reason.setdefault(reason or "UNEXPLAINED", []).append(difference)
    for reason, members in sorted(by_reason.items(), key=lambda item: item[0] != "UNEXPLAINED"):
        lines.append(f"### {reason}\n")
        for d in members:
            lines.append(f"- `{d.where}`: KubeRay `{_short(d.kuberay)}`, rayquota `{_short(d.ours)}`")
        lines.append("")
    return "\n".join(lines)


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    text = text.replace("`", "'")
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- main -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Peer:
    """The KubeRay operator compared against: its binary, its CRDs and the version it reports."""

    binary: Path | None = None  # None: the pinned v1.6.2, built by `rayquota peers build kuberay`
    crds: Path | None = None
    version: str = peers.KUBERAY_VERSION

    def argv(self, metrics_port: int, health_port: int) -> list[str]:
        argv = peers.kuberay_command(
            metrics_port=metrics_port, health_port=health_port, namespaces=[NAMESPACE]
        )
        if self.binary is not None:
            argv[0] = str(self.binary)
        return argv


def run(out: Path | None, keep: bool, cluster_prefix: str, command: str, peer: Peer = Peer()) -> int:
    binaries.ensure_all()
    if peer.binary is None or peer.crds is None:
        peers.build_kuberay()
    docs = manifests()
    started = dt.datetime.now(dt.UTC)
    theirs = LocalCluster(name=f"{cluster_prefix}-kuberay")
    ours = LocalCluster(name=f"{cluster_prefix}-rayquota")
    with ExitStack() as stack:
        for cluster in (theirs, ours):
            cluster.up()
            if not keep:
                stack.callback(cluster.down, purge=True)
        install_crds(theirs, peer.crds or peers.kuberay_crd_dir())
        install_crds(ours)
        kuberay_argv = [
            *peer.argv(free_port(), free_port()),
            f"--feature-gates={KUBERAY_FEATURE_GATES}",
        ]
        our_argv = [
            str(Path(sys.executable).with_name("rayquota")),
            "run",
            "--no-leader-elect",
            "--namespace",
            NAMESPACE,
            "--metrics-port",
            str(free_port()),
            "--health-port",
            str(free_port()),
        ]
        for argv, cluster, name in ((kuberay_argv, theirs, "kuberay"), (our_argv, ours, "rayquota")):
            log_path = cluster.log_dir / f"{name}-operator.log"
            stack.enter_context(PeerProcess(argv, kubeconfig=cluster.kubeconfig, log_path=log_path))
        for cluster in (theirs, ours):
            apply_all(cluster, docs)
        kuberay_objects, our_objects = settled(theirs), settled(ours)
    explained = explain(compare(kuberay_objects, our_objects), KNOWN_DIFFERENCES)
    text = report(explained, docs, RunInfo(started, git_commit(), command), peer.version)
    if out is None:
        print(text)
    else:
        out.write_text(text)
        log(f"wrote {out}")
    return 1 if any(not reason for _, reason in explained) else 0


def main() -> int:
    harness.stop_on_signals()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="write the Markdown report here (default: stdout)")
    parser.add_argument("--keep", action="store_true", help="leave both clusters running afterwards")
    parser.add_argument(
        "--cluster-prefix",
        default="parity",
        help="the two clusters are named <prefix>-kuberay and <prefix>-rayquota",
    )
    parser.add_argument(
        "--kuberay-binary",
        type=Path,
        help="the peer's operator binary (default: the pinned v1.6.2); e.g. "
        "~/.cache/rayquota/bin/kuberay-operator-v1.7.0/kuberay-operator "
        "(`rayquota peers build kuberay --source DIR --tag v1.7.0`)",
    )
    parser.add_argument(
        "--kuberay-crds",
        type=Path,
        help="the peer's CRD directory (its ray-operator/config/crd/bases), with --kuberay-binary",
    )
    parser.add_argument(
        "--kuberay-version", default=peers.KUBERAY_VERSION, help="the peer's version, for the report"
    )
    args = parser.parse_args()
    if (args.kuberay_binary is None) != (args.kuberay_crds is None):
        parser.error("--kuberay-binary and --kuberay-crds go together: a binary runs against its own CRDs")
    command = shlex.join(["python", "benchmarks/kuberay_side_by_side.py", *sys.argv[1:]])
    peer = Peer(args.kuberay_binary, args.kuberay_crds, args.kuberay_version)
    return run(args.out, args.keep, args.cluster_prefix, command, peer)


if __name__ == "__main__":
    raise SystemExit(main())
