"""KubeRay's operator and ours, side by side, on the same manifests; prints the differences.

    .venv/bin/python scripts/kuberay_side_by_side.py [--out docs/kuberay-compatibility.md] [--keep]

Two local control planes (`parity-kuberay`, `parity-rayquota`): KubeRay's CRDs and its operator
(v1.6.2, built with `go install` and cached like the other binaries) in the first, our CRDs and
`rayquota run` in the second. The same manifests are applied to both: KubeRay's samples
ray-cluster.complete.yaml, ray-cluster.autoscaler.yaml and ray-job.sample.yaml (read from the Go
module cache) and ours under samples/parity plus samples/ray-job.http-mode.yaml. When both sides
have settled, every Pod, Service, Job, ServiceAccount, Role, RoleBinding, RayCluster and RayJob in
the namespace is normalised (scripts/parity_diff.py) and compared field by field. Each difference
is matched against KNOWN_DIFFERENCES, which says why it is deliberate; anything unmatched is
reported as UNEXPLAINED and makes the script exit 1.

Not part of `make test`: it builds KubeRay's operator (minutes, once) and runs two clusters.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from parity_diff import Difference, KnownDifference, compare, explain

from rayquota.localcluster import binaries
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.install import install_crds
from rayquota.localcluster.paths import cache_root, repo_root
from rayquota.localcluster.ports import free_port

KUBERAY_VERSION = "v1.6.2"
KUBERAY_MODULE = "github.com/ray-project/kuberay/ray-operator"
NAMESPACE = "parity"
KUBERAY_SAMPLES = ("ray-cluster.complete.yaml", "ray-cluster.autoscaler.yaml", "ray-job.sample.yaml")
OUR_SAMPLES = (
    "samples/parity/ray-cluster.multi-host-gpu.yaml",
    "samples/parity/ray-cluster.recreate.yaml",
    "samples/ray-job.http-mode.yaml",
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
)
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
        r"\.metadata\.annotations\.ray\.io/hash-without-replicas-and-workers-to-delete",
        "A digest of the spec for the Recreate strategy; each operator hashes its own way and only "
        "compares it with its own pods.",
    ),
    KnownDifference(
        r"ulimit -n|KUBERAY_GEN_AUTOSCALER_START_CMD",
        "We follow KubeRay's next release (master): `ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}` "
        "(same limit unless the variable is set) and KUBERAY_GEN_AUTOSCALER_START_CMD on the autoscaler.",
    ),
    KnownDifference(
        r"initContainers\[name=wait-gcs-ready\]\.args",
        "Our own wording of the same loop: `ray health-check` against the head Service every 5 s, "
        "quiet for two minutes, then showing the check's errors.",
    ),
    KnownDifference(
        r"Job/.*containers\[name=ray-job-submitter\]\.args",
        "Our submit script: the same steps (wait for the GCS health endpoint, submit once with a "
        "fixed submission id unless `ray job status` finds it, then `ray job logs --follow`) in our "
        "own wording; v1.6.2 does not wait for the GCS (KubeRay master does, as we do).",
    ),
    KnownDifference(
        r"\.status\.(reason|message)$|\.status\.conditions\[type=[A-Za-z]+\]\.message",
        "Human-readable messages are our own words.",
    ),
    KnownDifference(
        r"\.status\.lastUpdateTime|\.status\.observedGeneration",
        "Written when the status changes; timing differs between operators.",
    ),
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- KubeRay's operator ------------------------------------------------------------------------------


def go_env(name: str) -> str:
    return subprocess.run(
        [binaries.find_go(), "env", name], capture_output=True, text=True, check=True
    ).stdout.strip()


def kuberay_binary() -> Path:
    """KubeRay's operator, built once with `go install` into the shared binary cache."""
    target = cache_root() / "bin" / f"kuberay-operator-{KUBERAY_VERSION}" / "kuberay-operator"
    if target.is_file():
        return target
    log(f"building KubeRay's operator {KUBERAY_VERSION} with go install (cached afterwards) ...")
    with tempfile.TemporaryDirectory() as gobin:
        env = dict(os.environ, GOBIN=gobin, CGO_ENABLED="0", GOFLAGS="-mod=mod")
        subprocess.run(
            [binaries.find_go(), "install", f"{KUBERAY_MODULE}@{KUBERAY_VERSION}"], env=env, check=True
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(Path(gobin) / "ray-operator"), target)
    return target


def kuberay_module_dir() -> Path:
    """KubeRay's module source in the Go module cache (its CRDs and samples)."""
    path = Path(go_env("GOMODCACHE")) / f"{KUBERAY_MODULE}@{KUBERAY_VERSION}"
    if not path.is_dir():
        subprocess.run(
            [binaries.find_go(), "mod", "download", f"{KUBERAY_MODULE}@{KUBERAY_VERSION}"], check=True
        )
    return path


@contextmanager
def process(
    name: str, cmd: list[str], env: dict[str, str], log_dir: Path
) -> Iterator[subprocess.Popen[bytes]]:
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"{name}.log", "wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# --- manifests ------------------------------------------------------------------------------------


def manifests(kuberay_dir: Path) -> list[dict[str, Any]]:
    paths = [kuberay_dir / "config" / "samples" / name for name in KUBERAY_SAMPLES]
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
    cluster.kubectl("apply", "--server-side", "-f", "-", input=text)


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

Generated by `scripts/kuberay_side_by_side.py`: KubeRay's operator {version} and rayquota were
run side by side on two local control planes with the same manifests ({manifests}), and
everything each created was compared field by field after normalising generated names, uids,
timestamps and IPs. Every remaining difference is listed with the reason it is deliberate.

KubeRay fields we keep but do not act on (a Warning event `UnimplementedField` says so on the
object): `historyServerOptions`, `networkPolicy`, `tlsOptions` (when enabled),
`gcsFaultToleranceOptions`, `authOptions` (token mode), `headGroupSpec.enableIngress` and
`headGroupSpec.ingressOptions`. Fields read by the Ray autoscaler itself from the RayCluster
(`workerGroupSpecs[].priority`, `idleTimeoutSeconds`, `autoscalerOptions.upscalingMode`) work
unchanged. Some fields and behaviours come from KubeRay's next release rather than {version}
(`preRunningDeadlineSeconds` is in {version}; `autoscalerOptions.command/args`, `ingressOptions`,
`networkPolicy`, `tlsOptions`, `historyServerOptions`, `workerGroupSpecs[].priority`,
`JobStatusCheckTimeoutExceeded`, `RAY_START_ULIMIT_OPEN_FILES`, `KUBERAY_GEN_AUTOSCALER_START_CMD`
and the K8sJobMode submitter waiting for the GCS are on KubeRay's master branch).

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

"""


def report(explained: list[tuple[Difference, str]], docs: list[dict[str, Any]]) -> str:
    names = ", ".join(sorted({f"{d['kind']} {d['metadata']['name']}" for d in docs}))
    lines = [HEADER.format(version=KUBERAY_VERSION, manifests=names)]
    unexplained = [d for d, reason in explained if not reason]
    lines.append(
        f"## Result of the last run\n\n{len(explained)} differences, {len(unexplained)} unexplained.\n"
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


def run(out: Path | None, keep: bool) -> int:
    binaries.ensure_all()
    operator_binary = kuberay_binary()
    kuberay_dir = kuberay_module_dir()
    docs = manifests(kuberay_dir)
    theirs, ours = LocalCluster(name="parity-kuberay"), LocalCluster(name="parity-rayquota")
    with ExitStack() as stack:
        for cluster in (theirs, ours):
            cluster.up()
            if not keep:
                stack.callback(cluster.down, purge=True)
        install_crds(theirs, kuberay_dir / "config" / "crd" / "bases")
        install_crds(ours)
        kuberay_env = dict(os.environ, KUBECONFIG=str(theirs.kubeconfig))
        stack.enter_context(
            process(
                "kuberay-operator",
                [
                    str(operator_binary),
                    f"--metrics-addr=127.0.0.1:{free_port()}",
                    f"--health-probe-bind-address=127.0.0.1:{free_port()}",
                    "--enable-leader-election=false",
                    f"--watch-namespace={NAMESPACE}",
                ],
                kuberay_env,
                theirs.log_dir,
            )
        )
        our_env = dict(os.environ, KUBECONFIG=str(ours.kubeconfig))
        stack.enter_context(
            process(
                "rayquota-operator",
                [
                    str(Path(sys.executable).with_name("rayquota")),
                    "run",
                    "--no-leader-elect",
                    "--namespace",
                    NAMESPACE,
                    "--metrics-port",
                    str(free_port()),
                    "--health-port",
                    str(free_port()),
                ],
                our_env,
                ours.log_dir,
            )
        )
        for cluster in (theirs, ours):
            apply_all(cluster, docs)
        kuberay_objects, our_objects = settled(theirs), settled(ours)
    explained = explain(compare(kuberay_objects, our_objects), KNOWN_DIFFERENCES)
    text = report(explained, docs)
    if out is None:
        print(text)
    else:
        out.write_text(text)
        log(f"wrote {out}")
    return 1 if any(not reason for _, reason in explained) else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="write the Markdown report here (default: stdout)")
    parser.add_argument("--keep", action="store_true", help="leave both clusters running afterwards")
    args = parser.parse_args()
    return run(args.out, args.keep)


if __name__ == "__main__":
    raise SystemExit(main())
