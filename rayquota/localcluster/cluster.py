"""Start, stop and inspect the local control plane.

One cluster per name; its state (certificates, etcd data, kubeconfig, logs, the pids of
its processes) lives in ``state_root()/NAME``. Every server binds to 127.0.0.1 on ports
picked free at start-up, so two clusters never collide.
"""

from __future__ import annotations

import json
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import yaml

from rayquota.localcluster import binaries
from rayquota.localcluster.command_lines import (
    apiserver_command,
    controller_manager_command,
    etcd_command,
    kwok_command,
    scheduler_command,
)
from rayquota.localcluster.nodes import NodePool, kwok_config, load_pools
from rayquota.localcluster.paths import state_root
from rayquota.localcluster.pki import PkiFiles, ensure_front_proxy, ensure_pki
from rayquota.localcluster.processes import ClusterError, alive, cmdline, launch, stop_groups, wait_until
from rayquota.ports import free_port

__all__ = ["COMPONENTS", "ClusterError", "LocalCluster", "run_kubectl"]

# Kept under their old names: tests and benchmarks import them from here.
_alive, _cmdline, _wait_for = alive, cmdline, wait_until

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
"""


def run_kubectl(
    *args: str, input: str | None = None, check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Our kubectl; with check, a failure raises ClusterError carrying kubectl's own message."""
    cmd = [str(binaries.KUBERNETES.path("kubectl")), *args]
    result = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise ClusterError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


@dataclass
class LocalCluster:
    """Handle on one named local control plane."""

    name: str = "default"
    nodes_file: Path | None = None
    # Benchmarks count API requests per client: the API server's metrics have no client
    # label, its audit log has the user agent. Off by default (it costs the server CPU).
    audit: bool = False

    @property
    def state_dir(self) -> Path:
        return state_root() / self.name

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def audit_log(self) -> Path:
        return self.log_dir / "audit.log"

    @property
    def _pid_file(self) -> Path:
        return self.state_dir / "processes.json"

    # ---- inspection -------------------------------------------------------------------------

    def processes(self) -> dict[str, dict[str, object]]:
        if not self._pid_file.exists():
            return {}
        data: dict[str, dict[str, object]] = json.loads(self._pid_file.read_text())
        return data

    def _owned_alive(self) -> dict[str, int]:
        """Components whose recorded pid is alive and still runs our binary."""
        alive: dict[str, int] = {}
        for component, info in self.processes().items():
            pid = int(str(info["pid"]))
            if _alive(pid) and str(info["binary"]) in _cmdline(pid):
                alive[component] = pid
        return alive

    @property
    def server(self) -> str:
        info = self.processes().get("kube-apiserver", {})
        return str(info.get("url", ""))

    def healthy(self) -> bool:
        if set(self._owned_alive()) != set(COMPONENTS):
            return False
        return self._readyz()

    def _readyz(self) -> bool:
        url = self.server
        if not url:
            return False
        pki = PkiFiles.under(self.state_dir / "pki")
        ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
        ctx.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
        try:
            with urllib.request.urlopen(url + "/readyz", context=ctx, timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def status_lines(self) -> list[str]:
        if not self.state_dir.exists():
            # Never started, or purged (`cluster down --purge`): no directory to name.
            hint = "`rayquota cluster up` starts it"
            return [f"cluster {self.name!r}: not started (no state: never set up, or purged); {hint}"]
        alive = self._owned_alive()
        recorded = self.processes()
        lines = [f"cluster {self.name!r} state in {self.state_dir}"]
        for component in COMPONENTS:
            info = recorded.get(component)
            if info is None:
                lines.append(f"  {component:<24} not started")
                continue
            state = "running" if component in alive else "stopped"
            where = f" {info['url']}" if info.get("url") else ""
            lines.append(f"  {component:<24} {state} (pid {info['pid']}){where}")
        if alive:
            lines.append(f"  apiserver ready: {'yes' if self._readyz() else 'no'}")
            lines.append(f"  kubeconfig: {self.kubeconfig}")
        return lines

    # ---- kubectl ----------------------------------------------------------------------------

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return run_kubectl(
            "--kubeconfig", str(self.kubeconfig), *args, input=input, check=check, timeout=timeout
        )

    # ---- lifecycle --------------------------------------------------------------------------

    def up(self, *, log: Callable[[str], None] | None = None) -> None:
        """Start every component unless the cluster is already up (idempotent)."""
        say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        if self.healthy():
            say(f"cluster {self.name!r} is already running ({self.server})")
            return
        started = time.monotonic()
        self.down(quiet=True)
        paths = binaries.ensure_all()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        pki = ensure_pki(self.state_dir / "pki")
        records: dict[str, dict[str, object]] = {}
        self._start_store_and_apiserver(paths, pki, records, say)
        self._start_controllers_and_kwok(paths, pki, records)
        say("  kube-controller-manager, kube-scheduler, kwok started")
        pools = load_pools(self.nodes_file)
        self._create_nodes(pools)
        expected = [n for pool in pools for n in pool.node_names()]
        _wait_for(
            f"{len(expected)} fake nodes Ready",
            lambda: self._nodes_ready(expected),
            60,
            self.log_dir / "kwok.log",
        )
        _wait_for(
            "the default service account",
            self._default_sa_exists,
            60,
            self.log_dir / "kube-controller-manager.log",
        )
        dead = set(COMPONENTS) - set(self._owned_alive())
        if dead:
            raise ClusterError(f"components exited during start-up: {sorted(dead)}; logs in {self.log_dir}")
        say(
            f"cluster {self.name!r} up in {time.monotonic() - started:.1f}s: {len(expected)} nodes; "
            f"export KUBECONFIG={self.kubeconfig}"
        )

    def _start(
        self, records: dict[str, dict[str, object]], component: str, argv: Sequence[str], url: str = ""
    ) -> None:
        """Launch one component and record it (pid, binary, url, command line) in the pid file."""
        pid = launch(argv, self.log_dir / f"{component}.log", self.state_dir)
        records[component] = {"pid": pid, "binary": str(argv[0]), "url": url, "argv": list(argv)}
        self._pid_file.write_text(json.dumps(records, indent=2))

    def _start_store_and_apiserver(
        self,
        paths: dict[str, Path],
        pki: PkiFiles,
        records: dict[str, dict[str, object]],
        say: Callable[[str], None],
    ) -> None:
        """A fresh etcd and the API server on it (the kubeconfig points there); waits until both serve."""
        front_proxy = ensure_front_proxy(self.state_dir / "pki")
        etcd_dir = self.state_dir / "etcd"
        shutil.rmtree(etcd_dir, ignore_errors=True)  # every `up` after a `down` is a clean cluster
        etcd_port, peer_port = free_port(), free_port()
        api_port = free_port()
        api_url = f"https://127.0.0.1:{api_port}"
        self._write_kubeconfig(api_url, pki)
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._start(records, "etcd", etcd_command(paths["etcd"], etcd_dir, etcd_url, peer_port), etcd_url)
        say(f"  etcd on {etcd_url}")
        apiserver = apiserver_command(
            paths["kube-apiserver"], etcd_url, api_port, pki, front_proxy, self._audit_flags()
        )
        self._start(records, "kube-apiserver", apiserver, api_url)
        say(f"  kube-apiserver on {api_url}")
        _wait_for("etcd", lambda: self._http_ok(etcd_url + "/health"), 30, self.log_dir / "etcd.log")
        _wait_for("kube-apiserver /readyz", self._readyz, 60, self.log_dir / "kube-apiserver.log")

    def _start_controllers_and_kwok(
        self, paths: dict[str, Path], pki: PkiFiles, records: dict[str, dict[str, object]]
    ) -> None:
        """The controller-manager, the scheduler and kwok (the fake nodes), all clients of the API server."""
        manager = controller_manager_command(
            paths["kube-controller-manager"], self.kubeconfig, free_port(), pki
        )
        self._start(records, "kube-controller-manager", manager)
        self._start(
            records,
            "kube-scheduler",
            scheduler_command(paths["kube-scheduler"], self.kubeconfig, free_port()),
        )
        kwok_cfg = self.state_dir / "kwok.yaml"
        kwok_cfg.write_text(kwok_config())
        self._start(records, "kwok", kwok_command(paths["kwok"], self.kubeconfig, kwok_cfg, free_port()))

    def down(self, *, quiet: bool = False, purge: bool = False) -> list[str]:
        """Stop every recorded process (whole process groups) and wait until they are gone."""
        running = self._owned_alive()
        stopped = [c for c in reversed(COMPONENTS) if c in running]
        stop_groups(running[c] for c in stopped)
        if self._pid_file.exists():
            self._pid_file.unlink()
        if purge:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        if not quiet:
            print(
                f"cluster {self.name!r}: stopped {', '.join(stopped) or 'nothing (not running)'}",
                file=sys.stderr,
            )
        return stopped

    # ---- one component at a time (fault tests) --------------------------------------------------

    def stop_component(self, component: str, *, kill: bool = False) -> None:
        """Stop one running component (SIGTERM, or SIGKILL with `kill`) and wait until it is
        gone; its record stays, so :meth:`start_component` starts it again as it was."""
        pid = self._owned_alive().get(component)
        if pid is None:
            raise ClusterError(f"cluster {self.name!r}: {component} is not running")
        stop_groups([pid], first_signal=signal.SIGKILL if kill else signal.SIGTERM)

    def start_component(self, component: str, *, timeout_s: float = 60.0) -> None:
        """Start a stopped component with the command line it was first started with (same
        ports, certificates, etcd data), and wait until it serves (etcd /health, the API
        server /readyz) or, for the others, runs."""
        records = self.processes()
        info = records.get(component)
        if info is None or "argv" not in info:
            raise ClusterError(f"cluster {self.name!r}: no recorded command line for {component}")
        if component in self._owned_alive():
            raise ClusterError(f"cluster {self.name!r}: {component} is already running")
        argv = [str(arg) for arg in cast(list[object], info["argv"])]
        log = self.log_dir / f"{component}.log"
        records[component] = {**info, "pid": launch(argv, log, self.state_dir)}
        self._pid_file.write_text(json.dumps(records, indent=2))
        if component == "etcd":
            wait_until("etcd", lambda: self._http_ok(f"{info['url']}/health"), timeout_s, log)
        elif component == "kube-apiserver":
            wait_until("kube-apiserver /readyz", self._readyz, timeout_s, log)
        elif component not in self._owned_alive():
            raise ClusterError(f"cluster {self.name!r}: {component} exited at once; see {log}")

    def restart_component(self, component: str, *, down_s: float = 0.0, kill: bool = False) -> float:
        """Stop `component`, keep it down for `down_s` seconds, start it again and wait until it
        serves; returns how long it was down."""
        self.stop_component(component, kill=kill)
        stopped_at = time.monotonic()
        time.sleep(down_s)  # the outage itself, not a synchronisation
        self.start_component(component)
        return time.monotonic() - stopped_at

    # ---- helpers ----------------------------------------------------------------------------

    def _write_kubeconfig(self, url: str, pki: PkiFiles) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "rayquota-local",
                    "cluster": {"server": url, "certificate-authority": str(pki.ca_cert)},
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)},
                }
            ],
            "contexts": [
                {
                    "name": f"rayquota-{self.name}",
                    "context": {"cluster": "rayquota-local", "user": "admin", "namespace": "default"},
                }
            ],
            "current-context": f"rayquota-{self.name}",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig.chmod(0o600)

    def _audit_flags(self) -> list[str]:
        """One JSON line per finished request (metadata only), when `audit` is on."""
        if not self.audit:
            return []
        policy = self.state_dir / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=batch",
            "--audit-log-maxbackup=0",
            "--audit-log-maxsize=0",
        ]

    @staticmethod
    def _http_ok(url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def _create_nodes(self, pools: Sequence[NodePool]) -> None:
        docs = [m for pool in pools for m in pool.manifests()]
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    def _nodes_ready(self, names: list[str]) -> bool:
        result = self.kubectl(
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}="
            '{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}',
            check=False,
        )
        ready = {line.split("=")[0] for line in result.stdout.splitlines() if line.endswith("=True")}
        return set(names) <= ready

    def _default_sa_exists(self) -> bool:
        return self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0
