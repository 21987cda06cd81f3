"""A real Ray head on loopback, for the local control plane (whose Ray pods are kwok fakes) and
for tests: RayJobs run their entrypoints here through the local dashboard resolver.

Started with `ray start --head --block` in its own session, and stopped by ending exactly that
session's processes: `ray stop` would kill every Ray process on the machine, other users' too.

Serve is started on the head before anything is deployed, listening on 127.0.0.1 and a free
port: a deploy through the dashboard would otherwise start it on 0.0.0.0:8000, where every local
head's proxy shares the port and a request lands on any of them. (Serve keeps the HTTP options
it started with; the defaults a later deploy carries are ignored.)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil

from rayquota.ports import free_port

VENV_BIN = Path(sys.executable).parent
STARTED_MESSAGE = "Ray runtime started."
LOOPBACK = "127.0.0.1"


class LocalRayHead:
    """`env` is added to the head's environment and `extra_args` to its `ray start` (a head pod's
    GCS fault-tolerance or token settings, say)."""

    def __init__(
        self, num_cpus: int = 2, env: Mapping[str, str] | None = None, extra_args: Sequence[str] = ()
    ) -> None:
        self.num_cpus = num_cpus
        self.env = dict(env or {})
        self.extra_args = list(extra_args)
        self.temp_dir = Path(tempfile.mkdtemp(prefix="rq-ray-", dir="/tmp"))
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.temp_dir / "ray-start.log"
        self.gcs_port = 0
        self.dashboard_port = 0
        self.serve_port = 0
        self._ports: tuple[int, int, int, int] | None = None  # kept across restart()

    @property
    def dashboard_url(self) -> str:
        return f"http://{LOOPBACK}:{self.dashboard_port}"

    @property
    def serve_url(self) -> str:
        """Where Serve applications deployed on this head answer over HTTP."""
        return f"http://{LOOPBACK}:{self.serve_port}"

    def start(self, timeout_s: float = 120.0, attempts: int = 3) -> None:
        """Start; a start that loses a port race to another process is retried on new ports."""
        for attempt in range(attempts):
            try:
                self._start_once(timeout_s)
                return
            except RuntimeError:
                self._stop_processes()
                if attempt + 1 == attempts:
                    raise

    def _command(self, same_ports: bool = False) -> list[str]:
        # Only ports with fixed defaults are chosen here (two heads would collide on them);
        # Ray picks the others itself.
        if not same_ports or self._ports is None:
            self._ports = (free_port(), free_port(), free_port(), free_port())
        self.gcs_port, self.dashboard_port, client_port, agent_port = self._ports
        return [
            str(VENV_BIN / "ray"), "start", "--head", "--block",
            f"--node-ip-address={LOOPBACK}", f"--dashboard-host={LOOPBACK}",
            f"--port={self.gcs_port}", f"--dashboard-port={self.dashboard_port}",
            f"--ray-client-server-port={client_port}", f"--dashboard-agent-listen-port={agent_port}",
            "--include-dashboard=true", f"--num-cpus={self.num_cpus}", "--num-gpus=0",
            "--disable-usage-stats", f"--temp-dir={self.temp_dir}", *self.extra_args,
        ]  # fmt: skip

    def _start_once(self, timeout_s: float, same_ports: bool = False) -> None:
        env = {**os.environ, **self.env}
        # Entrypoints run `python`: make it this environment's interpreter.
        env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self._command(same_ports),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ray start exited: {self._log_tail()}")
            if STARTED_MESSAGE in self.log_path.read_text(errors="replace") and self._jobs_api_ready():
                self._start_serve(max(10.0, deadline - time.monotonic()), env, same_ports)
                return
            time.sleep(0.5)
        raise RuntimeError(f"Ray head not ready in {timeout_s}s: {self._log_tail()}")

    def _start_serve(self, timeout_s: float, env: dict[str, str], same_ports: bool = False) -> None:
        # A restarted head keeps its Serve port: Serve restored from the GCS serves there again.
        if not (same_ports and self.serve_port):
            self.serve_port = free_port()
        script = (
            "import ray\n"
            "from ray import serve\n"
            f"ray.init(address='{LOOPBACK}:{self.gcs_port}', logging_level='ERROR', log_to_driver=False)\n"
            f"serve.start(http_options={{'host': '{LOOPBACK}', 'port': {self.serve_port}}})\n"
        )
        try:
            started = subprocess.run(
                [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=timeout_s
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"Serve did not start in {timeout_s:.0f}s") from exc
        if started.returncode != 0:
            raise RuntimeError(f"Serve did not start: {started.stderr[-2000:]}")

    def _log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def _jobs_api_ready(self) -> bool:
        request = urllib.request.Request(f"{self.dashboard_url}/api/jobs/")
        if self.env.get("RAY_AUTH_TOKEN"):  # a head with token auth answers only with it
            request.add_header("x-ray-authorization", f"Bearer {self.env['RAY_AUTH_TOKEN']}")
        try:
            with urllib.request.urlopen(request, timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def kill(self) -> None:
        """End every process of the head at once (SIGKILL), as when its pod is lost: nothing
        gets to shut down cleanly. The temp dir stays for restart()."""
        for proc in self.processes():
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(self.processes(), timeout=10)
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)

    def restart(self, timeout_s: float = 120.0, attempts: int = 3) -> None:
        """Start again on the same ports with the same env and arguments (a new head pod); a
        start that fails (Ray gives its raylet 30 s to register, too short on a loaded machine)
        is tried again, as the kubelet would restart the pod."""
        for attempt in range(attempts):
            self.kill()
            try:
                self._start_once(timeout_s, same_ports=True)
                return
            except RuntimeError:
                if attempt + 1 == attempts:
                    raise

    def processes(self) -> list[psutil.Process]:
        """Live processes of this head: its session, or anything using its temp dir."""
        if self.process is None:
            return []
        found = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
                ours = os.getsid(proc.pid) == self.process.pid
                ours = ours or str(self.temp_dir) in " ".join(proc.info["cmdline"] or [])
                if ours and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
        return found

    def _stop_processes(self, grace_s: float = 8.0) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self.processes():
            time.sleep(0.3)
        for proc in self.processes():
            with contextlib.suppress(psutil.Error):
                proc.kill()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
        psutil.wait_procs(self.processes(), timeout=grace_s)

    def stop(self) -> None:
        self._stop_processes()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def main() -> int:
    """`python -m rayquota.devtools.localhead`: run a local Ray head until Ctrl-C and print
    the settings that point the operator's local dashboard resolver at it."""
    head = LocalRayHead()
    print("starting a local Ray head (10-30 s) ...", flush=True)
    head.start()
    print("Ray head ready. Run the operator with:", flush=True)
    print("  export RAYQUOTA_DASHBOARD_RESOLVER=local")
    print(f"  export RAYQUOTA_DASHBOARD_URL={head.dashboard_url}", flush=True)
    print(f"Serve applications answer on {head.serve_url}/", flush=True)
    print("Ctrl-C stops this head, and only it (not `ray stop`: that stops every Ray on the machine).")
    stop = False

    def request_stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        while not stop and head.process is not None and head.process.poll() is None:
            time.sleep(0.5)
    finally:
        head.stop()
        print("Ray head stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
