"""A small node agent: runs real Ray for the pods of one RayCluster that kwok reports Running.

kwok's pods run nothing. For each of the cluster's pods in phase Running the agent starts what
the pod's Ray container would: for the head pod a real Ray head on loopback (and, once it
answers, Ray's autoscaler as the head's sidecar, see :mod:`run_autoscaler`), for a worker pod
``ray start --address <head> --block`` with the resources of the pod's generated ``ray start``
command (``KUBERAY_GEN_RAY_START_CMD``). Each Ray node is identified by its pod's name as
KubeRay's are (``RAY_CLOUD_INSTANCE_ID``, ``RAY_NODE_TYPE_NAME``), so the v2 autoscaler maps Ray
nodes to pods; for the v1 autoscaler, which maps them by IP, each pod's IP is set to a loopback
address of its own and its Ray node listens there (``loopback_pod_ips``). A worker's processes
are stopped, by the id of the session they run in, when its pod is gone or being deleted.

Timings (monotonic seconds) are kept per pod: first seen, seen Running, Ray node joined.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml
from kubernetes import client, config

from rayquota.devtools.localhead import LOOPBACK, VENV_BIN
from rayquota.operator.ray.builders import rbac
from rayquota.ports import free_port
from tests.integration.ray.rayhead import RayHead

HERE = Path(__file__).resolve().parent
# The resource options of a pod's generated `ray start` a worker is started with.
RESOURCE_OPTIONS = ("--num-cpus", "--num-gpus", "--memory", "--resources")
# Literal variables of the pod's Ray container that Ray itself reads.
PASSED_ENV = ("RAY_enable_autoscaler_v2",)
# Starts of one Ray node while its pod lives (a container's restarts). Its raylet still waits 15 s
# for its dashboard agent's listen port whatever it is given; at load 15-25 on 2 cores a start
# fails that way about one time in two.
MAX_STARTS = 8
# Set to a folder: the Ray logs of each agent's head (autoscaler, workers) are copied there on stop.
KEEP_LOGS_ENV = "RAYQUOTA_TEST_KEEP_RAY_LOGS"
# A raylet given no port for its agents waits 15 s for each agent to write the port it chose, then
# aborts: too short on a loaded 2-core machine (heads and workers died this way). Given them, it
# does not wait.
AGENT_PORT_OPTIONS = ("--dashboard-agent-grpc-port", "--metrics-export-port", "--runtime-env-agent-port")
# A head's start is given this long per attempt (the machine may be loaded; 3 attempts).
HEAD_START_S = 240.0


class AutoscaledHead(RayHead):
    """The head of an autoscaled cluster: no Serve (nothing here deploys to it), and its agents'
    ports chosen up front (see AGENT_PORT_OPTIONS), kept when it is started again."""

    agent_ports: list[str] | None = None

    def _command(self, same_ports: bool = False) -> list[str]:
        if not same_ports or self.agent_ports is None:
            self.agent_ports = agent_port_options()
        return [*super()._command(same_ports), *self.agent_ports]

    def _start_serve(self, timeout_s: float, env: dict[str, str], same_ports: bool = False) -> None:
        return None


@dataclass
class PodTimes:
    seen: float
    running: float | None = None
    joined: float | None = None
    gone: float | None = None


@dataclass
class Worker:
    pod: str
    process: subprocess.Popen[bytes]
    starts: int = 1


@dataclass
class NodeAgent:
    """Runs Ray for the pods of RayCluster ``cluster`` in ``namespace`` until :meth:`stop`."""

    kubeconfig: Path
    namespace: str
    cluster: str
    head: AutoscaledHead | None = None
    autoscaler: subprocess.Popen[bytes] | None = None
    workers: dict[str, Worker] = field(default_factory=dict)
    times: dict[str, PodTimes] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # Ray's v1 autoscaler knows a Ray node by its IP and a pod by its podIP: each pod gets a
    # loopback address of its own (the head 127.0.0.1), its Ray node listens there.
    loopback_pod_ips: bool = False
    pod_ips: dict[str, str] = field(default_factory=dict)
    head_pod: str = ""
    last_head_failure: str = ""
    head_starts: int = 0  # ray start calls of the head (each tries up to 3 times on its own)
    autoscaler_starts: int = 0
    head_start_s: float = 0.0  # how long the head's successful `ray start` took
    starting_head: AutoscaledHead | None = None  # the head whose `ray start` runs now
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> NodeAgent:
        self.api = config.new_client_from_config(config_file=str(self.kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self._thread = threading.Thread(target=self._run, name=f"node-agent-{self.cluster}", daemon=True)
        self._thread.start()
        return self

    # --- the loop ---------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._step()
            except Exception as exc:
                if not self._stop.is_set():
                    self.errors.append(repr(exc))
            self._stop.wait(0.25)

    def _step(self) -> None:
        selector = f"ray.io/cluster={self.cluster}"
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=selector).items
        live = {p.metadata.name: p for p in pods if p.metadata.deletion_timestamp is None}
        now = time.monotonic()
        for name, pod in live.items():
            times = self.times.setdefault(name, PodTimes(seen=now))
            if pod.status.phase == "Running" and times.running is None:
                times.running = now
        for name in list(self.workers):
            if name not in live:
                self._stop_worker(name)
            elif self.workers[name].process.poll() is not None and self.workers[name].starts <= MAX_STARTS:
                self._restart_worker(live[name])
        for name, pod in live.items():
            if pod.status.phase != "Running":
                continue
            node_type = pod.metadata.labels.get("ray.io/node-type")
            if node_type == "head" and self.head is None:
                self._start_head(pod)
            elif node_type == "worker" and name not in self.workers and self.head is not None:
                self._start_worker(pod)
        if self.head is not None:
            self._keep_head_up()
            self._note_joined()

    # --- head and autoscaler --------------------------------------------------------------------

    def _start_head(self, pod: Any) -> None:
        container = pod.spec.containers[0]
        options = _start_options(container)
        env = {**_ray_env(container), **_identity(pod)}
        head = AutoscaledHead(num_cpus=int(float(options.get("--num-cpus", "1"))), env=env)
        if self.loopback_pod_ips:
            self._set_pod_ip(pod, LOOPBACK)
        if self._gave_up_on_the_head():
            return
        self.head_starts += 1
        began, self.starting_head = time.monotonic(), head
        try:
            head.start(timeout_s=HEAD_START_S)
        except RuntimeError as exc:  # a crashed container: a later step starts a new one
            self.last_head_failure = repr(exc)
            head.stop()
            return
        finally:
            self.starting_head = None
        self.head_start_s = time.monotonic() - began
        self.head = head
        self.times[pod.metadata.name].joined = time.monotonic()
        if any(c.name == "autoscaler" for c in pod.spec.containers):
            self._start_autoscaler(pod.metadata.name)

    def _keep_head_up(self) -> None:
        """A container restart, as the kubelet does: under load a started Ray head can still
        die (its client server gives up waiting for the GCS and ``ray start --block`` ends the
        rest); it is started again on the same ports (the autoscaler, the workers and the
        operator's dashboard address keep theirs), and an autoscaler that exited is started
        again; each at most MAX_STARTS times."""
        assert self.head is not None and self.head.process is not None
        if self.head.process.poll() is not None:
            if self._gave_up_on_the_head():
                return
            self.head_starts += 1
            try:
                self.head.restart(timeout_s=HEAD_START_S)
            except RuntimeError as exc:  # the next step sees it down and starts it again
                self.last_head_failure = repr(exc)
                return
        if self.autoscaler is not None and self.autoscaler.poll() is not None:
            if self.autoscaler_starts >= MAX_STARTS:
                if self.autoscaler_starts == MAX_STARTS:
                    self.errors.append(f"the autoscaler exited {self.autoscaler_starts} times")
                    self.autoscaler_starts += 1  # given up
                return
            _end_session(self.autoscaler)
            self._start_autoscaler(self.head_pod)

    def _gave_up_on_the_head(self) -> bool:
        """Whether the head has had its MAX_STARTS starts (the error said once). A ``ray start``
        that failed all its attempts (Ray gives the raylet 30 s to register with the GCS, too
        short at a load of 20 on two cores) is a crashed container, started again by a later
        step as a kubelet would, until then."""
        if self.head_starts < MAX_STARTS:
            return False
        if self.head_starts == MAX_STARTS:
            self.errors.append(f"the Ray head failed {MAX_STARTS} starts, the last: {self.last_head_failure}")
            self.head_starts += 1  # said once
        return True

    def _start_autoscaler(self, head_pod: str) -> None:
        assert self.head is not None
        self.head_pod = head_pod
        self.autoscaler_starts += 1
        custom = client.CustomObjectsApi(self.api)
        cluster = custom.get_namespaced_custom_object(
            "ray.io", "v1", self.namespace, "rayclusters", self.cluster
        )
        account = rbac.autoscaler_service_account_name(cluster)
        token = self._token(account)
        token_file = self.head.temp_dir / "serviceaccount-token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        kube = yaml.safe_load(self.kubeconfig.read_text())["clusters"][0]["cluster"]
        host, port = kube["server"].removeprefix("https://").rsplit(":", 1)
        env = {
            **os.environ,
            "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",
            "KUBERNETES_SERVICE_HOST": host,
            "KUBERNETES_SERVICE_PORT_HTTPS": port,
            "RAY_KUBERAY_CA_CERT_PATH": kube["certificate-authority"],
            "RAY_HEAD_POD_NAME": head_pod,
            "KUBERAY_CRD_VER": "v1",
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        env.pop("KUBECONFIG", None)  # nothing but the ServiceAccount's token
        with (self.head.temp_dir / "autoscaler.log").open("ab") as log:
            self.autoscaler = subprocess.Popen(
                [
                    sys.executable, str(HERE / "run_autoscaler.py"), self.cluster, self.namespace,
                    f"{LOOPBACK}:{self.head.gcs_port}", str(token_file),
                ],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )  # fmt: skip

    def _token(self, account: str) -> str:
        body = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = self.core.create_namespaced_service_account_token(account, self.namespace, body)
                return str(answer.status.token)
            except client.ApiException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    # --- workers ------------------------------------------------------------------------------

    def _start_worker(self, pod: Any) -> None:
        assert self.head is not None
        options = _start_options(pod.spec.containers[0])
        args = [f"{key}={value}" for key, value in options.items() if key in RESOURCE_OPTIONS]
        env = {**os.environ, **_ray_env(pod.spec.containers[0]), **_identity(pod)}
        env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        address = self._worker_ip(pod) if self.loopback_pod_ips else LOOPBACK
        command = [
            str(VENV_BIN / "ray"), "start", f"--address={LOOPBACK}:{self.head.gcs_port}", "--block",
            f"--node-ip-address={address}", "--disable-usage-stats",
            f"--dashboard-agent-listen-port={free_port()}", *agent_port_options(),
            *args,
        ]  # fmt: skip
        with (self.head.temp_dir / f"worker-{pod.metadata.name}.log").open("ab") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        self.workers[pod.metadata.name] = Worker(pod.metadata.name, process)

    def _worker_ip(self, pod: Any) -> str:
        """The pod's own loopback address (127.0.0.N, N from 2), written as its IP, kept across
        restarts of its Ray worker."""
        name = pod.metadata.name
        if name not in self.pod_ips:
            self.pod_ips[name] = f"127.0.0.{len(self.pod_ips) + 2}"
            self._set_pod_ip(pod, self.pod_ips[name])
        return self.pod_ips[name]

    def _set_pod_ip(self, pod: Any, address: str) -> None:
        """What a kubelet reports: the pod's IP, here the loopback address its Ray node listens
        on (kwok gave it one of its CIDR and leaves a pod with an IP alone)."""
        # A JSON patch (a list): a strategic merge would add to podIPs, not replace its one IP.
        patch = [
            {"op": "add", "path": "/status/podIP", "value": address},
            {"op": "add", "path": "/status/podIPs", "value": [{"ip": address}]},
        ]
        self.core.patch_namespaced_pod_status(pod.metadata.name, self.namespace, patch)

    def _restart_worker(self, pod: Any) -> None:
        """Ray gives a node 30 s to register with the GCS, too short on a loaded machine: a
        worker whose ``ray start`` gave up is started again while its pod lives (a container
        restart), at most MAX_STARTS times."""
        worker = self.workers.pop(pod.metadata.name)
        _end_session(worker.process)
        if worker.starts == MAX_STARTS:
            self.errors.append(f"the Ray worker of pod {pod.metadata.name} failed {worker.starts} starts")
            worker.starts += 1  # given up
            self.workers[pod.metadata.name] = worker
            return
        self._start_worker(pod)
        self.workers[pod.metadata.name].starts = worker.starts + 1

    def _stop_worker(self, name: str) -> None:
        worker = self.workers.pop(name)
        _end_session(worker.process)
        if name in self.times:
            self.times[name].gone = time.monotonic()

    def ray_nodes(self) -> dict[str, dict[str, Any]]:
        """The head's alive Ray nodes by the pod name they were started for."""
        assert self.head is not None
        url = f"{self.head.dashboard_url}/nodes?view=summary"
        with urllib.request.urlopen(url, timeout=10) as answer:
            summary = json.loads(answer.read())["data"]["summary"]
        nodes: dict[str, dict[str, Any]] = {}
        for node in summary:
            raylet = node.get("raylet") or {}
            if raylet.get("state") == "ALIVE":
                nodes[str(raylet.get("instanceId") or raylet.get("nodeName"))] = raylet
        return nodes

    def _note_joined(self) -> None:
        waiting = [n for n in self.workers if self.times[n].joined is None]
        if not waiting:
            return
        try:
            joined = self.ray_nodes()
        except OSError:  # the dashboard busy or restarting: asked again on the next step
            return
        for name in waiting:
            if name in joined:
                self.times[name].joined = time.monotonic()

    def progress(self) -> tuple[object, ...]:
        """What changes as Ray comes up for the cluster's pods: each pod seen, Running, its Ray
        node joined or gone; each Ray worker's starts; the head's and the autoscaler's starts;
        the size of each `ray start`'s log (the head's and the workers': each start attempt
        writes there; the autoscaler's, written every loop whatever happens, is left out)."""
        pods = tuple(
            (name, t.running is not None, t.joined is not None, t.gone is not None)
            for name, t in sorted(self.times.items())
        )
        starts = tuple((name, w.starts) for name, w in sorted(self.workers.items()))
        return pods, starts, self.head_starts, self.autoscaler_starts, self._start_log_sizes()

    def _start_log_sizes(self) -> tuple[tuple[str, int], ...]:
        head = self.head or self.starting_head
        if head is None:
            return ()
        sizes = []
        for log in sorted(head.temp_dir.glob("*.log")):
            with contextlib.suppress(OSError):  # the head stopped meanwhile
                if log.name != "autoscaler.log":
                    sizes.append((log.name, log.stat().st_size))
        return tuple(sizes)

    def describe(self, lines: int = 25) -> str:
        """For a failing wait: the agent's errors, its pods, and the last lines of the
        autoscaler's log and of each Ray worker's."""
        said = [
            f"node agent of {self.cluster}: errors {self.errors}, head starts {self.head_starts} "
            f"(took {self.head_start_s:.0f}s; last failure {self.last_head_failure or 'none'}), "
            f"autoscaler starts {self.autoscaler_starts}, pods {self.progress()[0]}, "
            f"worker starts {self.progress()[1]}"
        ]
        head = self.head or self.starting_head
        for log in sorted(head.temp_dir.glob("*.log")) if head is not None else []:
            with contextlib.suppress(OSError):
                tail = log.read_text(errors="replace").splitlines()[-lines:]
                said.append(f"--- {log.name}, last {len(tail)} lines:\n" + "\n".join(tail))
        return "\n".join(said)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        for name in list(self.workers):
            self._stop_worker(name)
        if self.autoscaler is not None:
            _end_session(self.autoscaler)
        if self.head is not None:
            keep = os.environ.get(KEEP_LOGS_ENV)
            if keep:  # the Ray logs go with the head's temp dir: a copy for whoever debugs
                shutil.copytree(self.head.temp_dir, Path(keep) / self.cluster, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("*.sock", "sockets"))  # fmt: skip
            self.head.stop()
        if hasattr(self, "api"):
            self.api.close()


def agent_port_options() -> list[str]:
    return [f"{option}={free_port()}" for option in AGENT_PORT_OPTIONS]


def _env_value(container: Any, name: str) -> str | None:
    for variable in container.env or []:
        if variable.name == name and variable.value is not None:
            return str(variable.value)
    return None


def _start_options(container: Any) -> dict[str, str]:
    """``--option=value`` pairs of the container's generated ``ray start`` command."""
    command = _env_value(container, "KUBERAY_GEN_RAY_START_CMD") or ""
    options: dict[str, str] = {}
    for word in shlex.split(command):
        if word.startswith("--") and "=" in word:
            key, value = word.split("=", 1)
            options[key] = value
    return options


def _ray_env(container: Any) -> dict[str, str]:
    return {name: value for name in PASSED_ENV if (value := _env_value(container, name)) is not None}


def _identity(pod: Any) -> dict[str, str]:
    """The variables KubeRay sets from the pod's name and group (field references in the pod)."""
    return {
        "RAY_CLOUD_INSTANCE_ID": pod.metadata.name,
        "RAY_NODE_TYPE_NAME": pod.metadata.labels["ray.io/group"],
    }


def _end_session(process: subprocess.Popen[bytes], grace_s: float = 8.0) -> None:
    """SIGTERM to the process's session (it was started in a new one), then SIGKILL what is left."""
    session = process.pid

    def members() -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["pid"]):
            with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
                if os.getsid(proc.pid) == session and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
        return found

    with contextlib.suppress(ProcessLookupError):
        os.killpg(session, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and members():
        time.sleep(0.2)
    for proc in members():
        with contextlib.suppress(psutil.Error):
            proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
