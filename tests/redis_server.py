"""A real Redis server on loopback, with a password, for the GCS fault-tolerance tests.

Debian's `redis-server` (installed by `make test` when missing): the server users run, from the
distribution's archive, with `redis-cli` beside it. No persistence, its own temp dir, stopped by
its PID.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from rayquota.ports import free_port

REDIS_SERVER = "redis-server"
REDIS_CLI = "redis-cli"


class RedisServer:
    def __init__(self) -> None:
        server, cli = shutil.which(REDIS_SERVER), shutil.which(REDIS_CLI)
        if server is None or cli is None:
            raise RuntimeError(
                "redis-server and redis-cli are needed: `make test` installs Debian's redis-server "
                "(apt-get install -y redis-server)"
            )
        self.server, self.cli = server, cli
        self.password = secrets.token_hex(16)
        self.port = 0
        self.dir = Path(tempfile.mkdtemp(prefix="rq-redis-", dir="/tmp"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 20.0) -> None:
        self.port = free_port()
        command = [
            self.server, "--bind", "127.0.0.1", "--port", str(self.port), "--requirepass", self.password,
            "--save", "", "--appendonly", "no", "--dir", str(self.dir), "--daemonize", "no",
            "--protected-mode", "yes",
        ]  # fmt: skip
        log = (self.dir / "redis.log").open("wb")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited: {(self.dir / 'redis.log').read_text()[-2000:]}")
            if self.cli_run("PING").stdout.strip() == "PONG":
                return
            time.sleep(0.2)
        raise RuntimeError(f"redis-server did not answer in {timeout_s}s")

    def cli_run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [
            self.cli,
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "--no-auth-warning",
            "-a",
            self.password,
        ]
        return subprocess.run([*command, *args], capture_output=True, text=True, timeout=30, check=False)

    def keys(self, pattern: str = "*") -> list[str]:
        result = self.cli_run("--scan", "--pattern", pattern)
        return [line for line in result.stdout.splitlines() if line]

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)
