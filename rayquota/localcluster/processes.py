"""The processes of a local control plane: start one in a session of its own, tell whether a
recorded pid still runs, stop one process group and wait until it is gone."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path


class ClusterError(RuntimeError):
    pass


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not running; reap it if it is our child.
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(")")[-1].split()[0] == "Z":
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
                return False
    except OSError:
        return False
    return True


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def wait_until(what: str, check: Callable[[], bool], timeout: float, log: Path | None = None) -> None:
    """Poll `check` every 0.1 s; on timeout raise ClusterError with the last lines of `log`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    tail = ""
    if log is not None and log.exists():
        tail = "\n--- last lines of " + str(log) + " ---\n" + "\n".join(log.read_text().splitlines()[-20:])
    raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}{tail}")


def launch(argv: Sequence[str], log: Path, cwd: Path) -> int:
    """Start `argv` in a new session (it survives the CLI; stopping kills the whole group), its
    output appended to `log`; returns its pid."""
    with log.open("ab") as logfile:
        proc = subprocess.Popen(
            list(argv),
            stdout=logfile,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=cwd,
        )
    return proc.pid


def stop_groups(
    pids: Iterable[int], timeout_s: float = 15.0, first_signal: signal.Signals = signal.SIGTERM
) -> None:
    """Send `first_signal` to each pid's process group, SIGKILL what is left after `timeout_s`;
    returns once every pid is gone."""
    pids = list(pids)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, first_signal)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
