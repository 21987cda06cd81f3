"""Stop and start one component of a running local cluster (fault tests: a worker's API server
stopped, then back). The component starts again with the command line it was first started
with, on the same port, as an operator would restart it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time

from rayquota.localcluster.cluster import ClusterError, LocalCluster, process_alive


def stop(cluster: LocalCluster, component: str, *, graceful: bool = True, timeout_s: float = 30) -> None:
    """Stop the component (SIGTERM, then SIGKILL; at once with SIGKILL unless ``graceful``: a
    crash, and no wait for the API server's own shutdown) and wait until it is gone."""
    info = cluster.processes().get(component)
    if info is None:
        raise ClusterError(f"cluster {cluster.name!r}: {component} was never started")
    pid = int(str(info["pid"]))
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM if graceful else signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while process_alive(pid):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            deadline += timeout_s
        time.sleep(0.1)


def start(cluster: LocalCluster, component: str, *, timeout_s: float = 120) -> None:
    """Start the component again as it was first started; for the API server, wait until it is
    ready."""
    records = cluster.processes()
    info = records.get(component)
    if info is None or "argv" not in info:
        raise ClusterError(f"cluster {cluster.name!r}: no recorded command line for {component}")
    argv = [str(a) for a in info["argv"]]  # type: ignore[attr-defined]
    with (cluster.log_dir / f"{component}.log").open("ab") as logfile:
        proc = subprocess.Popen(
            argv,
            stdout=logfile,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=cluster.state_dir,
        )
    records[component] = {**info, "pid": proc.pid}
    cluster.pid_file.write_text(json.dumps(records, indent=2))
    if component != "kube-apiserver":
        return
    deadline = time.monotonic() + timeout_s
    while not cluster.healthy():
        if time.monotonic() > deadline:
            raise ClusterError(
                f"cluster {cluster.name!r}: the API server is not ready after {timeout_s:.0f}s"
            )
        time.sleep(0.2)
