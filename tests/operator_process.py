"""`rayquota run` as a process of its own for integration tests that kill it, read its log for
tracebacks, or run two of it (leader election): the fault and fuzz tests.
RAYQUOTA_TEST_OPERATOR_VERBOSE=1 gives it debug logs (a failure's post-mortem)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from rayquota.localcluster.cluster import LocalCluster
from tests.polling import wait_for

REPO = Path(__file__).resolve().parents[1]


class OperatorProcess:
    """`rayquota run` on the namespaces `namespaces` names (a glob), its output in `log`.

    `leader`: with leader election on a Lease in `lease_namespace` (short periods, so a
    takeover is quick); without it the process reconciles at once. `webhooks`: the loopback
    admission webhooks (registered while it leads)."""

    def __init__(
        self,
        cluster: LocalCluster,
        log: Path,
        dashboard_map: Path,
        *,
        namespaces: str,
        webhooks: bool = True,
        lease_namespace: str | None = None,
        lease_duration_s: int = 4,
    ) -> None:
        self.cluster, self.log = cluster, log
        self.env = {
            **os.environ,
            "KUBECONFIG": str(cluster.kubeconfig),
            "RAYQUOTA_DASHBOARD_RESOLVER": "local",
            "RAYQUOTA_DASHBOARD_MAP_FILE": str(dashboard_map),
            # These tests kill operators: a killed one would leave its pending-workloads
            # APIService registered and unavailable (discovery fails for its group until the
            # next operator registers again), which is not what they test.
            "RAYQUOTA_VISIBILITY": "false",
        }
        flags = ["--webhooks" if webhooks else "--no-webhooks"]
        if webhooks:
            self.env["RAYQUOTA_WEBHOOK_PORT"] = "0"
        if lease_namespace is None:
            flags.append("--no-leader-elect")
        else:
            self.env.update(
                RAYQUOTA_OPERATOR_NAMESPACE=lease_namespace,
                RAYQUOTA_LEASE_DURATION=str(lease_duration_s),
                RAYQUOTA_LEASE_RENEW_PERIOD="1",
                RAYQUOTA_LEASE_RETRY_PERIOD="0.5",
            )
        self.argv = [
            sys.executable, "-m", "rayquota.cli", "run", "-n", namespaces,
            "--metrics-port", "0", "--health-port", "0", *flags,
        ]  # fmt: skip
        if os.environ.get("RAYQUOTA_TEST_OPERATOR_VERBOSE"):  # debug logs, for a failure's post-mortem
            self.argv.append("--verbose")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> OperatorProcess:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO
            )
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_reconciling(self, timeout_s: float = 90) -> None:
        def ready() -> bool:
            assert self.running(), f"the operator exited:\n{self.output()}"
            return "operator ready:" in self.output()

        wait_for("the operator to start reconciling", ready, timeout_s=timeout_s)

    def owns(self, holder: str | None) -> bool:
        return holder is not None and self.proc is not None and f"-{self.proc.pid}-" in holder

    def kill(self) -> None:
        if self.running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> int | None:
        """Ctrl-C, as a user stops it; its exit code."""
        if not self.running():
            return self.proc.returncode if self.proc else None
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def tracebacks(self) -> list[str]:
        """Every traceback the operator logged, with the log line before it."""
        lines = self.output().splitlines()
        return [
            "\n".join(lines[max(0, i - 1) : i + 6])
            for i, line in enumerate(lines)
            if "Traceback (most" in line
        ]
