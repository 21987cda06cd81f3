"""Measurement helpers shared by the side-by-side benchmarks.

- API requests by verb and resource, from the API server's own `apiserver_request_total`
  (all clients together: that metric has no client label), or per client from an audit log.
- CPU-seconds and peak RSS of a process tree, sampled with psutil.
- A peer process (an operator or controller) started against a kubeconfig and stopped again.
- Events created in the cluster.

The parsing helpers are pure and unit-tested; the rest does I/O.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Self, TypeVar

import psutil

# (verb, resource) -> requests. `resource` carries the subresource as "pods/status".
RequestCounts = Counter[tuple[str, str]]

R = TypeVar("R")  # a benchmark's result dataclass

WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"})

# One sample line: name{label="value",...} value [timestamp]
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


def parse_samples(text: str, metric: str) -> Iterator[tuple[dict[str, str], float]]:
    """Yield (labels, value) for every sample of one metric in Prometheus text format."""
    for line in text.splitlines():
        if not line.startswith(metric):
            continue
        match = _SAMPLE.match(line)
        if match is None or match.group("name") != metric:
            continue
        labels = {m.group("key"): m.group("value") for m in _LABEL.finditer(match.group("labels") or "")}
        yield labels, float(match.group("value"))


def _resource_key(resource: str, subresource: str) -> str:
    return f"{resource}/{subresource}" if subresource else resource


def request_counts(metrics_text: str) -> RequestCounts:
    """`apiserver_request_total` summed over codes, scopes and versions, by (verb, resource)."""
    counts: RequestCounts = Counter()
    for labels, value in parse_samples(metrics_text, "apiserver_request_total"):
        resource = _resource_key(labels.get("resource", ""), labels.get("subresource", ""))
        counts[(labels.get("verb", ""), resource)] += int(value)
    return counts


def writes(counts: Mapping[tuple[str, str], int]) -> int:
    return sum(n for (verb, _), n in counts.items() if verb in WRITE_VERBS)


def total(counts: Mapping[tuple[str, str], int]) -> int:
    return sum(counts.values())


def by_verb(counts: Mapping[tuple[str, str], int]) -> Counter[str]:
    verbs: Counter[str] = Counter()
    for (verb, _), n in counts.items():
        verbs[verb] += n
    return verbs


def format_counts(counts: Mapping[tuple[str, str], int], limit: int = 12) -> str:
    """The largest entries as `VERB resource=N, ...` (one line, for a report)."""
    top = sorted(((n, v, r) for (v, r), n in counts.items() if n), reverse=True)[:limit]
    return ", ".join(f"{v} {r}={n}" for n, v, r in top) or "none"


# ---- audit log: requests per client ---------------------------------------------------------

# The request verb in an audit event is the HTTP-ish verb in lower case ("create", "list"...);
# map it onto the names apiserver_request_total uses.
_AUDIT_VERBS = {
    "get": "GET",
    "list": "LIST",
    "watch": "WATCH",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
    "deletecollection": "DELETECOLLECTION",
}


def client_name(user_agent: str) -> str:
    """The program part of a user agent: `kuberay-operator/v1.6.2 (...)` -> `kuberay-operator`."""
    return user_agent.split("/", 1)[0].strip() or "unknown"


def audit_request_counts(
    lines: Iterable[str], since: float | None = None, until: float | None = None
) -> dict[str, RequestCounts]:
    """Requests per client program from an audit log (JSON lines).

    A request counts once: a watch at ResponseStarted (it may never complete while we look),
    anything else at ResponseComplete. Only requests received in [since, until) (epoch seconds)
    count when those are given.
    """
    per_client: dict[str, RequestCounts] = {}
    for line in lines:
        if not line.strip():
            continue
        event = json.loads(line)
        counted_stage = "ResponseStarted" if event.get("verb") == "watch" else "ResponseComplete"
        if event.get("stage") != counted_stage:
            continue
        received = _epoch(event.get("requestReceivedTimestamp", ""))
        if (since is not None and received < since) or (until is not None and received >= until):
            continue
        ref = event.get("objectRef")
        if ref:
            resource = _resource_key(ref.get("resource", ""), ref.get("subresource", ""))
        else:  # a non-resource request (discovery, /metrics): its path names it
            resource = event.get("requestURI", "").split("?", 1)[0]
        verb = _AUDIT_VERBS.get(event.get("verb", ""), event.get("verb", "").upper())
        counts = per_client.setdefault(client_name(event.get("userAgent", "")), Counter())
        counts[(verb, resource)] += 1
    return per_client


def _epoch(timestamp: str) -> float:
    """RFC 3339 with microseconds (the audit log's format) to epoch seconds; 0 if absent."""
    if not timestamp:
        return 0.0
    from datetime import datetime

    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def merged(per_client: Mapping[str, RequestCounts], exclude: Iterable[str] = ()) -> RequestCounts:
    """All clients' requests together, without the excluded ones."""
    skip = set(exclude)
    counts: RequestCounts = Counter()
    for client, requests in per_client.items():
        if client not in skip:
            counts.update(requests)
    return counts


def audit_files(path: Path) -> list[Path]:
    """The audit log and the files it was rotated into, oldest first.

    The API server rotates its audit log at ``--audit-log-maxsize`` megabytes (0 means 100 MB:
    its log library's default), renaming it ``<stem>-<timestamp><suffix>``; a long run (Kueue's
    large scale) fills several, and counting the last one alone undercounts."""
    rotated = sorted(path.parent.glob(f"{path.stem}-*{path.suffix}"))
    return [*rotated, path] if path.exists() else rotated


def read_audit_counts(
    path: Path, since: float | None = None, until: float | None = None
) -> dict[str, RequestCounts]:
    """Requests per client from the audit log at ``path`` and every file it was rotated into."""
    per_client: dict[str, RequestCounts] = {}
    for file in audit_files(path):
        with file.open() as log:
            for client, counts in audit_request_counts(log, since, until).items():
                per_client.setdefault(client, Counter()).update(counts)
    return per_client


# ---- the API server's /metrics --------------------------------------------------------------

# Our own scrapes show up in the audit log under this name, apart from any client measured.
POLLER_USER_AGENT = "rayquota-benchmark"

# Clients of the local control plane itself (and of the benchmark scripts) in the audit log;
# whatever else sent requests is the operator under test.
INFRA_CLIENTS = frozenset(
    {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl", POLLER_USER_AGENT}
)


@dataclass
class ApiServer:
    """Reads the API server named by a kubeconfig (client certificates or a token)."""

    kubeconfig: Path
    _client: Any = field(default=None, repr=False)

    def _api(self) -> Any:
        if self._client is None:
            from kubernetes import config

            self._client = config.new_client_from_config(config_file=str(self.kubeconfig))
            self._client.user_agent = f"{POLLER_USER_AGENT}/0"
        return self._client

    def get(self, path: str, timeout_s: float = 30) -> str:
        api = self._api()
        headers = {"User-Agent": api.user_agent}
        token = api.configuration.api_key.get("authorization")
        if token:
            headers["Authorization"] = token
        response = api.call_api(
            "GET", api.configuration.host + path, header_params=headers, _request_timeout=timeout_s
        )
        if response.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {response.status}")
        return str(response.read().decode())

    def request_counts(self) -> RequestCounts:
        return request_counts(self.get("/metrics"))


class Periodic:
    """Calls `tick()` at once and then every `interval_s` on a daemon thread while its `with`
    block runs."""

    def __init__(self, interval_s: float, name: str) -> None:
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def tick(self) -> None:
        raise NotImplementedError

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval_s + 35)

    def _loop(self) -> None:
        while True:
            pause = self.interval_s
            try:
                self.tick()
            except Exception as exc:  # a dead thread would silently stop measuring
                print(f"{self._thread.name}: {exc!r}; retrying", file=sys.stderr, flush=True)
                pause = max(pause, 1.0)
            if self._stop.wait(pause):
                return


class MetricsPoller(Periodic):
    """Scrapes the API server's request counters in the background and keeps the last good
    sample: for a server that is stopped at the end of a run (envtest), that is the closest
    reading to the end there is."""

    def __init__(self, server: ApiServer, interval_s: float = 2.0) -> None:
        super().__init__(interval_s, "metrics-poller")
        self.server = server
        self.first: RequestCounts | None = None
        self.last: RequestCounts | None = None

    def tick(self) -> None:
        with contextlib.suppress(Exception):  # not up yet, or already gone
            counts = self.server.request_counts()
            if self.first is None:
                self.first = counts
            self.last = counts


# ---- CPU and memory of a process tree -------------------------------------------------------


@dataclass
class TreeUsage:
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0


class ProcessTreeSampler(Periodic):
    """Samples a process and its descendants: CPU-seconds (user + system, summed over every
    process seen, exited ones included at their last reading) and peak RSS of the whole tree."""

    def __init__(self, pid: int, interval_s: float = 0.5) -> None:
        super().__init__(interval_s, f"sampler-{pid}")
        self.pid = pid
        self.usage = TreeUsage()
        self._cpu_by_pid: dict[int, float] = {}

    def tick(self) -> None:
        self.sample()

    def sample(self) -> TreeUsage:
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return self.usage
        rss = 0
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                with proc.oneshot():
                    times = proc.cpu_times()
                    rss += proc.memory_info().rss
                # A pid's own time only grows; the root's also carries its reaped children's.
                seconds = times.user + times.system
                if proc.pid == self.pid:
                    seconds += times.children_user + times.children_system
                self._cpu_by_pid[proc.pid] = max(self._cpu_by_pid.get(proc.pid, 0.0), seconds)
        self.usage = TreeUsage(
            cpu_s=sum(self._cpu_by_pid.values()),
            peak_rss_mb=max(self.usage.peak_rss_mb, rss / 2**20),
        )
        return self.usage


# ---- a peer process -------------------------------------------------------------------------


class PeerProcess:
    """A controller started against a kubeconfig in its own session, stopped by its group.

    Used as a context manager; `usage` holds its CPU-seconds and peak RSS when it has ended.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        kubeconfig: Path,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        nice: int = 0,
    ) -> None:
        self.argv = list(argv)
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.env = dict(os.environ, **(env or {}), KUBECONFIG=str(kubeconfig))
        self.nice = nice
        self.proc: subprocess.Popen[bytes] | None = None
        self.sampler: ProcessTreeSampler | None = None
        self._log: IO[bytes] | None = None

    def __enter__(self) -> PeerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        argv = ["nice", "-n", str(self.nice), *self.argv] if self.nice else self.argv
        self.proc = subprocess.Popen(
            argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.env,
            start_new_session=True,
        )
        self.sampler = ProcessTreeSampler(self.proc.pid).__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def usage(self) -> TreeUsage:
        return self.sampler.usage if self.sampler else TreeUsage()

    def sample(self) -> TreeUsage:
        """A fresh reading (the background one may be half an interval old)."""
        return self.sampler.sample() if self.sampler else TreeUsage()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 20) -> None:
        if self.proc is None:
            return
        if self.sampler is not None:
            self.sampler.sample()
            self.sampler.__exit__()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


# ---- Events ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventTally:
    objects: int  # Event objects stored
    occurrences: int  # the sum of their `count` (an aggregated Event counts each repeat)
    warnings: int  # Event objects of type Warning


def event_source(event: Mapping[str, Any]) -> str:
    """The component that reported an Event (`source.component`, or the events.k8s.io
    `reportingComponent`): the name its recorder was created with."""
    return str((event.get("source") or {}).get("component") or event.get("reportingComponent") or "?")


def tally_events(events: Iterable[Mapping[str, Any]]) -> EventTally:
    """Count Events: objects, occurrences (an aggregated Event counts each repeat), warnings."""
    objects = occurrences = warnings = 0
    for event in events:
        objects += 1
        occurrences += int(event.get("count") or (event.get("series") or {}).get("count") or 1)
        warnings += event.get("type") == "Warning"
    return EventTally(objects, occurrences, warnings)


def list_events(kubeconfig: Path) -> list[dict[str, Any]]:
    from rayquota.localcluster.cluster import run_kubectl

    out = run_kubectl(
        "--kubeconfig", str(kubeconfig), "get", "events", "-A", "-o", "json", timeout=120
    ).stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def event_sources(events: Iterable[Mapping[str, Any]]) -> Counter[str]:
    """Event objects per reporting component, to tell whose Events they are."""
    return Counter(event_source(event) for event in events)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[rank - 1])


def run_each(runs: Iterable[Callable[[], R]], describe: Callable[[R], list[str]]) -> list[R]:
    """Run each benchmark run in turn and say its figures (with JSON) on stderr as soon as it
    ends, so that a later run's failure never loses an earlier one's."""
    results = []
    for run in runs:
        result = run()
        print("\n".join([*describe(result), json.dumps(asdict(result))]), file=sys.stderr, flush=True)  # type: ignore[call-overload]
        results.append(result)
    return results


def print_report(
    results: Sequence[R],
    *,
    reference: R | None,
    describe: Callable[[R], list[str]],
    compare: Callable[[R, R], list[str]],
) -> None:
    """Each result, then each one against the reference, then all of them as one JSON line."""
    lines = [line for r in results for line in describe(r)]
    if reference is not None:
        lines += [line for r in results if r is not reference for line in compare(r, reference)]
    print("\n".join(lines))
    print(json.dumps([asdict(r) for r in results]))  # type: ignore[call-overload]


def ratio(ours: float, theirs: float) -> str:
    """`ours / theirs` for a report, `n/a` when the denominator is zero."""
    if theirs == 0:
        return "n/a" if ours else "1.00"
    return f"{ours / theirs:.2f}"


def wait_until(what: str, check: Any, timeout_s: float, interval_s: float = 1.0) -> float:
    """Poll `check()` until it is truthy; return the seconds it took, raise on the deadline."""
    started = time.monotonic()
    deadline = started + timeout_s
    while time.monotonic() < deadline:
        if check():
            return time.monotonic() - started
        time.sleep(interval_s)
    raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")


class WorkloadFollower(threading.Thread):
    """Follows Kueue's Workloads (kueue.x-k8s.io/v1beta2) through a run: waits for the kubeconfig
    the runner writes, lists, then watches from where it stopped (a fresh list after 410 Gone)
    until :meth:`stop_following`. Listed items come to :meth:`on_event` as ADDED. The API server
    starts late and stops early: errors are kept (20 at most) and the watch tried again."""

    user_agent = POLLER_USER_AGENT

    def __init__(self, kubeconfig: Path, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.kubeconfig = kubeconfig
        self.relists = 0
        """lists after the first (each may hide transitions)"""
        self.watch_errors: list[str] = []
        self.api_client: Any = None
        self._stop_flag = threading.Event()

    def on_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def stop_following(self) -> None:
        self._stop_flag.set()
        if self.is_alive():
            self.join(timeout=60)

    def run(self) -> None:
        from kubernetes import client, config, watch

        while not self.kubeconfig.exists():
            if self._stop_flag.wait(0.5):
                return
        version = ""
        listed_once = False
        custom: Any = None
        while not self._stop_flag.is_set():
            try:
                if custom is None:
                    self.api_client = config.new_client_from_config(config_file=str(self.kubeconfig))
                    self.api_client.user_agent = self.user_agent
                    custom = client.CustomObjectsApi(self.api_client)
                if not version:
                    listed = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloads")
                    version = listed["metadata"]["resourceVersion"]
                    self.relists += listed_once
                    listed_once = True
                    for item in listed.get("items") or ():
                        self.on_event("ADDED", item)
                stream = watch.Watch().stream(
                    custom.list_cluster_custom_object,
                    "kueue.x-k8s.io",
                    "v1beta2",
                    "workloads",
                    resource_version=version,
                    timeout_seconds=5,
                )
                for event in stream:
                    obj = event["object"]
                    version = obj["metadata"]["resourceVersion"]
                    self.on_event(event["type"], obj)
            except Exception as exc:  # the API server starts late and stops early
                if len(self.watch_errors) < 20:
                    self.watch_errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
                if "410" in str(exc):
                    version = ""
                time.sleep(0.5)


def stop_on_signals() -> None:
    """SIGTERM, SIGHUP and SIGINT end the benchmark through its `finally` blocks, which stop its
    local clusters and operators by PID. Without this SIGTERM ends Python at once, leaving them
    running, and a benchmark started in the background (`cmd &`) ignores SIGINT altogether.
    Later signals are ignored while that cleanup runs."""

    def stop(signum: int, _frame: object) -> None:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        print(f"signal {signal.Signals(signum).name}: stopping", file=sys.stderr, flush=True)
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, stop)


def namespaced_lister(
    kubeconfig: Path, group: str, version: str, namespace: str, plural: str
) -> Callable[..., Any]:
    """A list function for one namespaced resource (a custom one when ``group`` is set), for
    ``kubernetes.watch.Watch().stream``; the poller's user agent, so the audit counts it apart."""
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(kubeconfig))
    api.user_agent = f"{POLLER_USER_AGENT}/0"
    if group:
        custom = client.CustomObjectsApi(api)

        def list_custom(**kwargs: Any) -> Any:
            return custom.list_namespaced_custom_object(group, version, namespace, plural, **kwargs)

        return list_custom
    core = client.CoreV1Api(api)

    # Without a docstring naming a model class, the watch hands over plain JSON.
    def list_core(**kwargs: Any) -> Any:
        return getattr(core, f"list_namespaced_{plural.rstrip('s')}")(namespace, **kwargs)

    return list_core
