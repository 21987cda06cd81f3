"""The tests' real Ray heads: the package's local Ray head (rayquota.devtools.localhead),
counted. A head is a raylet, a GCS, a dashboard and often a Serve controller: on a 2-core machine
more than four alive at once slow every test beside them, so starting a fifth fails the test that
asks for it (the suite's budget is a test too). The count is the whole run's: every pytest process
of it (the xdist workers of `make test`) records its live heads in the run's folder
(``$RAYQUOTA_TEST_RUN_DIR``, made by tests/conftest.py), so a head started by one worker counts
against the others too.

Four is what tests/scheduling.py's three Ray head groups start at most (a shared head in two
workers, one extra head beside one of them, one head of its own in the third). A test that starts
a head without saying so (the ``ray_head`` or ``second_ray_head`` fixture, or the
``starts_ray_heads`` mark) would land in any group, so it fails at once, whichever worker runs
it, instead of exceeding the count by chance."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import ClassVar

import psutil
import pytest

from rayquota.devtools.localhead import LOOPBACK, LocalRayHead
from rayquota.ports import free_port
from tests import scheduling
from tests.scheduling import RUN_DIR_ENV

__all__ = ["MAX_ALIVE", "RUN_DIR_ENV", "RayHead", "free_port", "most_alive_in_run", "set_current_test"]

MAX_ALIVE = 4
_HEAD_FILE_PREFIX = "ray-head-"
_MOST_ALIVE_FILE = "ray-heads-most-alive"


# Ray gives a new node's raylet 30 s to register with the GCS (hard-coded in Ray); at a load of
# 20 on two cores one `ray start` after another can miss it, as clean-clone runs showed (the first
# RPC alone took 80 s). A kubelet would restart the container: so do the tests, more times.
START_ATTEMPTS = 5

# What a test head leaves out or slows down, so the heads alive beside the suite cost less of a
# 2-core machine: an idle head with Serve used 7.9 s of CPU a minute as Ray starts it and 5.2 s
# with these (the processes of one head measured over 60 s). Left out: Ray's own autoscaler
# monitor (a KubeRay head runs without it when an autoscaler sidecar scales it, and the autoscaler
# tests start theirs) and the node metrics only Ray's dashboard UI shows; Serve's control loop
# runs every 0.5 s rather than every 0.1 s.
LIGHT_HEAD_ENV = {
    "RAY_enable_metrics_collection": "0",
    "RAY_metrics_report_interval_ms": "60000",
    "REPORTER_UPDATE_INTERVAL_MS": "60000",
    "RAY_task_events_report_interval_ms": "5000",
    "RAY_SERVE_CONTROL_LOOP_INTERVAL_S": "0.5",
}
LIGHT_HEAD_ARGS = ("--no-monitor",)


class TooManyRayHeads(AssertionError):
    pass


class UndeclaredRayHead(AssertionError):
    pass


_current_test: pytest.Item | None = None


def set_current_test(item: pytest.Item | None) -> None:
    """The test this process runs now (tests/conftest.py, around each test's setup, call and teardown)."""
    global _current_test
    _current_test = item


class RayHead(LocalRayHead):
    """A local Ray head that counts the heads of this test run alive at once."""

    alive: ClassVar[set[int]] = set()  # this process's
    most_alive: ClassVar[int] = 0  # this process's; the run's: most_alive_in_run()
    shared = False  # the run's shared head (the ``ray_head`` fixture's)

    def __init__(
        self, num_cpus: int = 2, env: Mapping[str, str] | None = None, extra_args: Sequence[str] = ()
    ) -> None:
        super().__init__(num_cpus, {**LIGHT_HEAD_ENV, **(env or {})}, [*LIGHT_HEAD_ARGS, *extra_args])

    def start(self, timeout_s: float = 120.0, attempts: int = START_ATTEMPTS) -> None:
        if id(self) not in RayHead.alive:
            self._check_declared()
            self._count_in()
        try:
            super().start(timeout_s, attempts)
        except BaseException:
            self._count_out()
            raise

    def restart(self, timeout_s: float = 120.0, attempts: int = START_ATTEMPTS) -> None:
        super().restart(timeout_s, attempts)

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self._count_out()

    def _check_declared(self) -> None:
        """A head on a control-plane test is started only by a test that says it uses one."""
        item = _current_test
        if item is None or not scheduling.runs_on_a_cluster(item):
            return
        if self.shared and scheduling.uses_a_ray_head(item):
            return
        if not self.shared and scheduling.starts_extra_ray_heads(item):
            return
        raise UndeclaredRayHead(
            f"{item.nodeid} starts a Ray head it does not declare: use the `ray_head` fixture "
            "(the shared head) or `second_ray_head`, or mark the module "
            f"`pytestmark = pytest.mark.{scheduling.OWN_RAY_HEADS_MARK}` when it starts heads of "
            "its own, so tests/scheduling.py puts it in a Ray head group"
        )

    def _count_in(self) -> None:
        with _run_registry() as run_dir:
            others = _live_head_files(run_dir) if run_dir else []
            mine = [f"this process's {n + 1}" for n in range(len(RayHead.alive))]
            theirs = [f.name for f in others if not f.name.startswith(f"{_HEAD_FILE_PREFIX}{os.getpid()}-")]
            alive = len(mine) + len(theirs)
            if alive >= MAX_ALIVE:
                raise TooManyRayHeads(
                    f"a Ray head would be the {alive + 1}th alive at once in this run (at most {MAX_ALIVE}; "
                    f"alive: {mine + theirs}): share the ray_head fixture's head or stop a head when its "
                    "last test is done"
                )
            RayHead.alive.add(id(self))
            RayHead.most_alive = max(RayHead.most_alive, len(RayHead.alive))
            if run_dir:
                self._run_file(run_dir).touch()
                most = run_dir / _MOST_ALIVE_FILE
                before = int(most.read_text() or 0) if most.exists() else 0
                most.write_text(str(max(before, alive + 1)))

    def _count_out(self) -> None:
        RayHead.alive.discard(id(self))
        with _run_registry() as run_dir:
            if run_dir:
                self._run_file(run_dir).unlink(missing_ok=True)

    def _run_file(self, run_dir: Path) -> Path:
        return run_dir / f"{_HEAD_FILE_PREFIX}{os.getpid()}-{id(self)}"

    def remove_serve_applications(self, timeout_s: float = 60.0) -> None:
        """Delete every Serve application (a declarative deploy of none, with the head's own HTTP
        options, so Serve keeps running on its port) and wait until the head lists none: the
        next test on a shared head starts as on a fresh one. Deployed again while a controller
        of the test is still stopping, they are deleted again."""
        body = {"http_options": {"host": LOOPBACK, "port": self.serve_port}, "applications": []}
        url = f"{self.dashboard_url}/api/serve/applications/"
        deadline = time.monotonic() + timeout_s
        while True:
            headers = {"Content-Type": "application/json"}
            request = urllib.request.Request(
                url, data=json.dumps(body).encode(), method="PUT", headers=headers
            )
            with urllib.request.urlopen(request, timeout=timeout_s):
                pass
            settle = time.monotonic() + 10.0
            while time.monotonic() < min(settle, deadline):
                with urllib.request.urlopen(url, timeout=timeout_s) as answer:
                    left = sorted(json.loads(answer.read()).get("applications") or {})
                if not left:
                    return
                time.sleep(0.5)
            if time.monotonic() >= deadline:
                raise AssertionError(f"Serve applications still listed after {timeout_s}s: {left}")


@contextlib.contextmanager
def _run_registry() -> Iterator[Path | None]:
    """The run's folder, locked against the run's other processes (None: no run-wide count)."""
    folder = os.environ.get(RUN_DIR_ENV)
    if not folder or not Path(folder).is_dir():
        yield None
        return
    with open(Path(folder) / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield Path(folder)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _live_head_files(run_dir: Path) -> list[Path]:
    """The run's heads alive: files of processes that are gone (a crashed worker) do not count."""
    files = sorted(run_dir.glob(f"{_HEAD_FILE_PREFIX}*"))
    return [f for f in files if psutil.pid_exists(int(f.name[len(_HEAD_FILE_PREFIX) :].split("-")[0]))]


def most_alive_in_run() -> int:
    """The most Ray heads this run had alive at once (its processes together)."""
    folder = os.environ.get(RUN_DIR_ENV)
    most = Path(folder) / _MOST_ALIVE_FILE if folder else None
    if most is not None and most.exists():
        return int(most.read_text() or 0)
    return RayHead.most_alive
