"""Kueue's own scheduler benchmark, run against minimalkueue and against rayquota.

Kueue's runner (sigs.k8s.io/kueue v0.19.2, test/performance/scheduler) starts envtest (our
etcd and kube-apiserver), installs Kueue's CRDs, starts the controller it is given, creates the
Workloads of a generator config, finishes each one once it has been admitted for its runtime,
and writes a summary; Kueue's checker judges the summary against the config's limits. Only the
controller differs between the runs: same runner, generator config, checker and binaries.

Run:
    .venv/bin/python benchmarks/kueue_side_by_side.py                      # null, minimalkueue, rayquota
    .venv/bin/python benchmarks/kueue_side_by_side.py --controller minimalkueue
    .venv/bin/python benchmarks/kueue_side_by_side.py --scale large        # 1,000 CQs, 50,000 wls
    .venv/bin/python benchmarks/kueue_side_by_side.py --scale tas          # TAS: 640 nodes, 15,000 wls

With ``--scale tas`` the runner creates the 640 nodes of Kueue's TAS config (1 block x 10 racks
x 64) and a Topology, starts the controller with TAS on (minimalkueue ``--enableTAS``), and the
Workloads ask for required / preferred / sliced rack placement; the run ends with a check of
every recorded topology assignment against the nodes (see ``tas_check.py``).

Floors (``kueue_floors.py``): the default invocation first runs a null controller
(``null_admitter.py``: one admission write per Workload, no quota) on the same runner, which
measures what this API server delivers; the report then gives each side's wall and times to
admission against it, against the quota-held floor computed from the generator config with the
runner's hold times of that side's run, and against minimalkueue, with the evictions per side.

Each run's artifacts (summary.yaml, wlStates.csv, the controller's logs and stats, the audit
log) stay in --out/<controller>/. The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness, kueue_floors
from benchmarks.kueue_report import NULL, ClassFigures, RunResult, compare, describe, floor_lines
from benchmarks.tas_check import AssignmentWatch
from benchmarks.workload_journal import WorkloadJournal
from rayquota.localcluster import binaries, peers
from rayquota.localcluster.cluster import AUDIT_POLICY
from rayquota.ports import free_port
from rayquota.queueing import parse_quantity

SCALES = {"baseline": "baseline", "large": "large-scale", "tas": "tas"}
# A cap on the runner's recording, not an expectation: upstream's 10 minutes is too short
# for the baseline on a loaded 2-core machine, and a run that hits the cap writes no summary.
RUNNER_TIMEOUT = {"baseline": "40m", "large": "120m", "tas": "40m"}

REPO = Path(__file__).resolve().parent.parent

# Audit-log clients that are not the controller under test: the runner (its generator, its
# finisher and envtest's CRD install), the API server's own loopback client, and our poller.
RUNNER_SIDE_CLIENTS = frozenset({"runner", "kube-apiserver", harness.POLLER_USER_AGENT})


def rayquota_kueue_mode() -> list[str]:
    """rayquota in Kueue-API mode, in minimalkueue's place (KUBECONFIG is set by the wrapper).
    Its own CRDs are installed by the runner's envtest with Kueue's (``runner_crds``)."""
    return [
        str(REPO / ".venv" / "bin" / "rayquota"),
        "run",
        "--queue-api=kueue",
        "--no-leader-elect",
        f"--metrics-port={free_port()}",
        f"--health-port={free_port()}",
    ]


def runner_crds(out: Path) -> Path:
    """The CRDs the runner's envtest installs before it starts the controller and the generator:
    Kueue's and rayquota's (its ray.io kinds, which the operator watches), the same for every
    side. Applying rayquota's from the controller's wrapper instead made the operator start
    behind the generator's flood: on 2026-11-29, at load 7, it was ready 2 min 12 s after its
    start, the generator had finished, no ClusterQueue status showed pending work yet, and
    Kueue's recorder ended the run with 12,692 of 50,000 Workloads."""
    crds = out / "runner-crds"
    crds.mkdir(parents=True, exist_ok=True)
    for source in (*sorted(peers.kueue_crd_dir().glob("*.yaml")), *sorted((REPO / "crds").glob("*.yaml"))):
        link = crds / source.name
        if not link.exists():
            link.symlink_to(source)
    return crds


def null_controller() -> list[str]:
    """The API server's delivery floor: admits every Workload in one write, no quota."""
    return [sys.executable, str(REPO / "benchmarks" / "null_admitter.py")]


def null_admitter_stats(err_log: Path) -> dict[str, Any] | None:
    """The null controller's own cost, the JSON line it writes to stderr at exit."""
    for line in reversed(err_log.read_text().splitlines() if err_log.exists() else []):
        if line.startswith('{"null_admitter"'):
            return dict(json.loads(line)["null_admitter"])
    return None


def rayquota_kueue_mode_available() -> bool:
    cli = REPO / ".venv" / "bin" / "rayquota"
    help_text = subprocess.run([str(cli), "run", "--help"], capture_output=True, text=True).stdout
    return "--queue-api" in help_text


# ---- one run --------------------------------------------------------------------------------


def admission_times(wl_csv: Path) -> dict[str, list[int]]:
    by_class: dict[str, list[int]] = defaultdict(list)
    with wl_csv.open() as f:
        for row in csv.DictReader(f):
            by_class[row["class name"]].append(int(row["ms to admitted"]))
    return by_class


def useful_work_cpu_s(generator: dict[str, Any]) -> float:
    """The CPU-seconds the generated Workloads need if each runs exactly once."""
    total_ms = 0
    for cohort in generator["cohorts"]:
        for queues in cohort["queuesSets"]:
            per_queue = sum(
                wset["count"] * _cpus(wl) * wl["runtimeMs"]
                for wset in queues["workloadsSets"]
                for wl in wset["workloads"]
            )
            total_ms += cohort["count"] * queues["count"] * per_queue
    return total_ms / 1000


def _cpus(workload: dict[str, Any]) -> float:
    """CPUs of one generated Workload: a number (baseline) or a quantity per pod (TAS)."""
    return parse_quantity(workload["request"]) / 1000 * int(workload.get("podCount") or 1)


def cq_usage(summary: dict[str, Any]) -> dict[str, float]:
    """Per ClusterQueue class, as Kueue's checker computes it: used / (quota x elapsed)."""
    usage: dict[str, float] = {}
    for name, cq in summary["clusterQueueClasses"].items():
        elapsed_ms = _ms_between(cq["firstEventTime"], cq["lastEventTime"])
        usage[name] = cq["cpuUsed"] * 100 / (cq["nominalQuota"] * elapsed_ms) if elapsed_ms else 0.0
    return usage


def _ms_between(first: Any, last: Any) -> float:
    from datetime import datetime

    def parse(t: Any) -> datetime:
        return t if isinstance(t, datetime) else datetime.fromisoformat(str(t).replace("Z", "+00:00"))

    return (parse(last) - parse(first)).total_seconds() * 1000


def scaled_generator(generator: Path, fraction: float, run_dir: Path) -> Path:
    """The generator config with every workload set's count times ``fraction`` (at least one
    each; queues, nodes and quotas unchanged), written into ``run_dir``; 1.0: upstream's file."""
    if fraction == 1.0:
        return generator
    config = yaml.safe_load(generator.read_text())
    for cohort in config["cohorts"]:
        for queues in cohort["queuesSets"]:
            for workloads in queues["workloadsSets"]:
                workloads["count"] = max(1, round(int(workloads["count"]) * fraction))
    scaled = run_dir / "generator.yaml"
    scaled.write_text(yaml.safe_dump(config, sort_keys=False))
    return scaled


def controller_wrapper(run_dir: Path, name: str, argv: Sequence[str]) -> Path:
    """An executable the runner can start in minimalkueue's place.

    The runner calls it as `<path> --kubeconfig FILE [minimalkueue flags]`: the wrapper keeps
    the kubeconfig, drops the rest, and execs the controller so that the rusage the runner
    records (wall, CPU, max RSS) is the controller's own.
    """
    wrapper = run_dir / name
    wrapper.write_text(
        "#!/bin/sh\n"
        "# Started by Kueue's runner as: $0 --kubeconfig FILE [flags meant for minimalkueue]\n"
        'export KUBECONFIG="$2"\n'
        f"exec {shlex.join(argv)}\n"
    )
    wrapper.chmod(0o755)
    return wrapper


def audited_apiserver(run_dir: Path) -> tuple[Path, Path]:
    """A kube-apiserver wrapper for envtest that also writes an audit log (per-client counts)."""
    policy = run_dir / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    log = run_dir / "audit.log"
    wrapper = run_dir / "kube-apiserver"
    flags = [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={log}",
        "--audit-log-format=json",
        "--audit-log-mode=batch",
        "--audit-log-maxsize=0",
    ]
    apiserver = binaries.KUBERNETES.path("kube-apiserver")
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(str(apiserver))} "$@" {shlex.join(flags)}\n')
    wrapper.chmod(0o755)
    return wrapper, log


def run_checker(run_dir: Path, stats: Path, rangespec: Path) -> tuple[bool, list[str]]:
    checker = peers.kueue_tool("checker")
    result = subprocess.run(
        [
            str(checker),
            "-test.v",
            f"--summary={run_dir / 'summary.yaml'}",
            f"--cmdStats={stats}",
            f"--range={rangespec}",
        ],
        cwd=peers.kueue_workdir(),  # the checker's imports panic without a Makefile above it
        capture_output=True,
        text=True,
    )
    (run_dir / "checker.out").write_text(result.stdout + result.stderr)
    # `go test -v` prints each t.Errorf as "    checker_test.go:NN: message".
    failures = [line.strip() for line in result.stdout.splitlines() if "checker_test.go:" in line]
    return result.returncode == 0, failures


def run_in_own_group(
    cmd: list[str], *, cwd: Path, env: dict[str, str], log: IO[str]
) -> subprocess.CompletedProcess[str]:
    """The runner in a process group of its own, which is stopped once it exits: a runner that
    fails (its generator timed out on a loaded API server) leaves envtest's etcd and API server
    running, and they weigh on whatever runs next."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=log, text=True, start_new_session=True)
    try:
        proc.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            time.sleep(2)
    return subprocess.CompletedProcess(cmd, proc.returncode)


def run_once(
    name: str,
    argv: Sequence[str] | None,
    *,
    scale: str,
    out: Path,
    nice: int,
    audit: bool,
    fraction: float = 1.0,
    journal: bool = False,
) -> RunResult:
    """One runner invocation with one controller (argv None: Kueue's own minimalkueue)."""
    config = peers.kueue_config(SCALES[scale])
    run_dir = out / name
    run_dir.mkdir(parents=True, exist_ok=True)
    generator_file = scaled_generator(config / "generator.yaml", fraction, run_dir)
    for stale in ("kubeconfig", "summary.yaml", "wlStates.csv", "audit.log"):
        (run_dir / stale).unlink(missing_ok=True)
    controller = peers.kueue_tool("minimalkueue") if argv is None else controller_wrapper(run_dir, name, argv)
    env = dict(os.environ, KUBEBUILDER_ASSETS=str(peers.envtest_assets()))
    # envtest gives kube-apiserver 20 s to come up; on a loaded 2-core machine that is too short.
    env.setdefault("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", "180s")
    audit_log = None
    if audit:
        apiserver, audit_log = audited_apiserver(run_dir)
        env["TEST_ASSET_KUBE_APISERVER"] = str(apiserver)
    cmd = [
        "nice",
        "-n",
        str(nice),
        str(peers.kueue_tool("runner")),
        f"--o={run_dir}",
        f"--crds={runner_crds(out)}",
        f"--generatorConfig={generator_file}",
        f"--minimalKueue={controller}",
        f"--timeout={RUNNER_TIMEOUT[scale]}",
        # Upstream's make target keeps the controller's logs in files; no metrics scraping,
        # which would make minimalkueue listen on every interface.
        "--withLogs=true",
        "--logToFile=true",
        *(["--enableTAS"] if scale == "tas" else []),
    ]
    print(f"[{name}] {shlex.join(cmd)}", file=sys.stderr, flush=True)
    started = time.monotonic()
    server = harness.ApiServer(run_dir / "kubeconfig")
    tas_journal = run_dir / "tas-journal.jsonl"
    # The null controller places nothing: there is no placement to check.
    placement = (
        AssignmentWatch(run_dir / "kubeconfig", tas_journal) if scale == "tas" and name != NULL else None
    )
    if placement is not None:
        placement.start()
    transitions = (
        WorkloadJournal(run_dir / "kubeconfig", run_dir / "workloads-journal.jsonl") if journal else None
    )
    if transitions is not None:
        transitions.start()
    load_avg_start = os.getloadavg()
    with (run_dir / "runner.log").open("w") as runner_log, harness.MetricsPoller(server, 5.0) as poller:
        proc = run_in_own_group(cmd, cwd=peers.kueue_workdir(), env=env, log=runner_log)
    tas = placement.stop() if placement is not None else None
    evictions = transitions.stop() if transitions is not None else None
    load_avg_end = os.getloadavg()
    if proc.returncode != 0:
        tail = "\n".join((run_dir / "runner.log").read_text().splitlines()[-20:])
        raise SystemExit(f"[{name}] the runner failed ({proc.returncode}); {run_dir}/runner.log:\n{tail}")
    print(f"[{name}] runner done in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)

    summary = yaml.safe_load((run_dir / "summary.yaml").read_text())
    stats_file = run_dir / f"{controller.name}.stats.yaml"
    stats = yaml.safe_load(stats_file.read_text())
    times = admission_times(run_dir / "wlStates.csv")
    classes = {
        cls: ClassFigures(
            count=int(s["count"]),
            avg_admission_ms=float(s["averageTimeToAdmissionMs"]),
            p90_admission_ms=harness.percentile(times[cls], 90),
            evictions=int(s["totalEvictions"]),
        )
        for cls, s in sorted(summary["workloadClasses"].items())
    }
    used_cpu_s = sum(cq["cpuUsed"] for cq in summary["clusterQueueClasses"].values()) / 1e6
    generator = yaml.safe_load(generator_file.read_text())
    api = poller.last or harness.RequestCounts()
    controller_requests = controller_writes = None
    if audit_log is not None and audit_log.exists():
        per_client = harness.read_audit_counts(audit_log)
        mine = harness.merged(per_client, exclude=RUNNER_SIDE_CLIENTS)
        controller_requests, controller_writes = harness.total(mine), harness.writes(mine)
        (run_dir / "requests-by-client.json").write_text(
            json.dumps({c: harness.format_counts(n, 30) for c, n in per_client.items()}, indent=2)
        )
    passed, failures = run_checker(run_dir, stats_file, config / "rangespec.yaml")
    holds = kueue_floors.runner_hold_beyond_runtime(run_dir / "wlStates.csv", generator)
    return RunResult(
        controller=name,
        scale=scale,
        wall_s=stats["wallMs"] / 1000,
        controller_cpu_s=(stats["userMs"] + stats["sysMs"]) / 1000,
        controller_peak_rss_mb=stats["maxrss"] / 1024,  # Linux reports KiB
        classes=classes,
        cq_usage_pct=cq_usage(summary),
        held_beyond_runtime_cpu_s=used_cpu_s - useful_work_cpu_s(generator),
        workloads=sum(c.count for c in classes.values()),
        api_requests=harness.total(api),
        api_requests_by_verb=dict(harness.by_verb(api)),
        controller_requests=controller_requests,
        controller_writes=controller_writes,
        checker_passed=passed,
        checker_failures=failures,
        tas=tas,
        journal=evictions,
        load_avg_start=load_avg_start,
        load_avg_end=load_avg_end,
        runner_hold_beyond_runtime_s={k: round(v, 3) for k, v in sorted(holds.items())},
        quota_floor_s=round(kueue_floors.quota_floor(generator, holds).wall_s, 1),
        null_admitter=null_admitter_stats(run_dir / f"{name}.err.log") if name == NULL else None,
    )


def main(argv: Sequence[str] | None = None) -> int:
    harness.stop_on_signals()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", choices=sorted(SCALES), default="baseline")
    parser.add_argument(
        "--controller",
        action="append",
        help="null (the API server's delivery floor), minimalkueue, rayquota, or NAME=COMMAND (a "
        "controller reading $KUBECONFIG); repeatable; default: null, minimalkueue and rayquota",
    )
    parser.add_argument("--out", type=Path, default=Path("/tmp/rayquota-kueue-side-by-side"))
    parser.add_argument(
        "--nice", type=int, default=10, help="niceness of the runner and everything it starts"
    )
    parser.add_argument(
        "--fraction",
        type=float,
        default=1.0,
        help="run this fraction of each workload set (e.g. 0.1 on a busy machine); Kueue's "
        "checker still judges against the full config's limits",
    )
    parser.add_argument("--no-audit", dest="audit", action="store_false", help="no per-client request counts")
    parser.add_argument(
        "--journal",
        action="store_true",
        help="watch every Workload's transitions (OUT/NAME/workloads-journal.jsonl): why each eviction was",
    )
    args = parser.parse_args(argv)

    peers.build_kueue_tools()
    binaries.ensure_all()
    controllers: list[tuple[str, list[str] | None]] = []
    for spec in args.controller or [NULL, "minimalkueue", "rayquota"]:
        if spec == NULL:
            controllers.append((spec, null_controller()))
        elif spec == "minimalkueue":
            controllers.append((spec, None))
        elif spec == "rayquota":
            if rayquota_kueue_mode_available():
                controllers.append((spec, rayquota_kueue_mode()))
            else:
                print(
                    "rayquota: Kueue-API mode (`rayquota run --queue-api kueue`) is not built yet; skipped",
                    file=sys.stderr,
                )
        else:
            name, _, command = spec.partition("=")
            controllers.append((name, shlex.split(command)))

    results = harness.run_each(
        (
            functools.partial(
                run_once,
                name,
                command,
                scale=args.scale,
                out=args.out,
                nice=args.nice,
                audit=args.audit,
                fraction=args.fraction,
                journal=args.journal,
            )
            for name, command in controllers
        ),
        describe,
    )
    reference = next((r for r in results if r.controller == "minimalkueue"), None)
    generator = yaml.safe_load(
        scaled_generator(
            peers.kueue_config(SCALES[args.scale]) / "generator.yaml", args.fraction, args.out
        ).read_text()
    )
    print("\n".join(floor_lines(results, kueue_floors.quota_floor(generator))))
    harness.print_report(results, reference=reference, describe=describe, compare=compare)
    return 0


if __name__ == "__main__":
    sys.exit(main())
