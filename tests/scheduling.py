"""How `make test` spreads the suite over pytest-xdist workers (``-n N --dist loadscope``).

Each worker is a pytest process of its own, with its own control plane (``pytest-<pid>``), its
own package-scoped operators and at most its own shared Ray head. The unit of work handed to a
worker is a *group*, chosen per test from where it lives and what it uses, so a new test file
is placed without anyone listing it:

- every module with a test that uses a real Ray head joins one of three groups, each run whole
  by one worker: ``ray-heads-shared`` for modules that use only the shared head (the
  ``ray_head`` fixture, started once per worker that needs it), ``ray-heads-extra`` for modules
  that start a head beside it (a module's second head, ``second_ray_head``, in upgrade tests, or
  heads of their own next to the shared one), ``ray-heads-own`` for modules that start only
  heads of their own, one at a time (marked ``starts_ray_heads``). So the run never has more
  than four heads alive (1 + 2 + 1), whichever worker runs what;
- a package whose conftest sets ``DISTRIBUTE_AS_ONE_GROUP = True`` (its package fixture is a
  control plane or a fleet of its own) is one group, so that fixture is started once;
- any other module is a group of its own.

The groups need what only a collection knows (each test's fixtures), and xdist's controller
does not collect: the first worker to finish collecting writes them to the run's folder
(``groups.json``) before it reports its collection, and :class:`SuiteScheduling` (the
controller's) reads them when it splits the collection into groups. It hands the groups out
longest first (by an estimate: a test on the control plane weighs far more than a unit test)
and, when a worker asks for more, prefers a group from the package that worker is in, so a
package's operator is rarely started twice on one worker.
"""

from __future__ import annotations

import json
import os
import sys
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
# A folder shared by the run's processes (the controller makes it, its workers inherit the variable):
# the groups, and tests.integration.ray.rayhead's count of the run's live Ray heads.
RUN_DIR_ENV = "RAYQUOTA_TEST_RUN_DIR"
GROUPS_FILE = "groups.json"
RAY_HEADS_EXTRA_GROUP = "ray-heads-extra"
RAY_HEADS_SHARED_GROUP = "ray-heads-shared"
RAY_HEADS_OWN_GROUP = "ray-heads-own"
RAY_HEAD_FIXTURE = "ray_head"
SECOND_RAY_HEAD_FIXTURE = "second_ray_head"
OWN_RAY_HEADS_MARK = "starts_ray_heads"
WHOLE_PACKAGE_FLAG = "DISTRIBUTE_AS_ONE_GROUP"
# What a test costs, roughly (seconds), by where it runs: only the order of the groups uses it.
CLUSTER_TEST_WEIGHT = 10.0
UNIT_TEST_WEIGHT = 0.05


def _parts(item: pytest.Item) -> tuple[str, ...]:
    try:
        return Path(str(item.path)).resolve().relative_to(TESTS).parts
    except ValueError:
        return ()


def runs_on_a_cluster(item: pytest.Item) -> bool:
    parts = _parts(item)
    return bool(parts) and parts[0] in ("integration", "e2e")


def uses_a_ray_head(item: pytest.Item) -> bool:
    """The shared head (the ``ray_head`` fixture) or heads of its own (marked ``starts_ray_heads``)."""
    return starts_extra_ray_heads(item) or uses_the_shared_ray_head(item)


def uses_the_shared_ray_head(item: pytest.Item) -> bool:
    return RAY_HEAD_FIXTURE in getattr(item, "fixturenames", ())


def starts_extra_ray_heads(item: pytest.Item) -> bool:
    """A head that is not the shared one: the ``second_ray_head`` fixture or heads of its own."""
    own = item.get_closest_marker(OWN_RAY_HEADS_MARK) is not None
    return own or SECOND_RAY_HEAD_FIXTURE in getattr(item, "fixturenames", ())


def _module_of_nodeid(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _package_as_one_group(item: pytest.Item) -> str | None:
    """The folder of the nearest package whose conftest asks to be one group."""
    parts = _parts(item)
    for depth in range(len(parts) - 1, 0, -1):
        conftest = sys.modules.get(".".join(("tests", *parts[:depth], "conftest")))
        if conftest is not None and getattr(conftest, WHOLE_PACKAGE_FLAG, False):
            return "/".join(("tests", *parts[:depth]))
    return None


def groups_of(items: Sequence[pytest.Item]) -> dict[str, str]:
    """Each test's group (nodeid -> group; see the module's docstring)."""
    on_cluster = [i for i in items if runs_on_a_cluster(i)]
    with_shared = {_module_of_nodeid(i.nodeid) for i in on_cluster if uses_the_shared_ray_head(i)}
    with_extra = {_module_of_nodeid(i.nodeid) for i in on_cluster if starts_extra_ray_heads(i)}
    groups: dict[str, str] = {}
    for item in items:
        module = _module_of_nodeid(item.nodeid)
        if module in with_extra and module in with_shared:
            groups[item.nodeid] = RAY_HEADS_EXTRA_GROUP
        elif module in with_extra:
            groups[item.nodeid] = RAY_HEADS_OWN_GROUP
        elif module in with_shared:
            groups[item.nodeid] = RAY_HEADS_SHARED_GROUP
        else:
            groups[item.nodeid] = _package_as_one_group(item) or module
    return groups


def record_groups(items: Sequence[pytest.Item]) -> None:
    """Write the groups for the controller (a worker, before it reports its collection)."""
    folder = os.environ.get(RUN_DIR_ENV)
    if not folder:
        return
    path = Path(folder) / GROUPS_FILE
    if path.exists():
        return  # every worker collects the same tests: the first one's will do
    partial = path.with_name(f"{GROUPS_FILE}.{os.getpid()}")
    partial.write_text(json.dumps(groups_of(items)))
    partial.replace(path)  # whole or nothing for a reader


def _recorded_groups() -> dict[str, str]:
    folder = os.environ.get(RUN_DIR_ENV)
    path = Path(folder) / GROUPS_FILE if folder else None
    if path is None or not path.exists():
        return {}
    groups: dict[str, str] = json.loads(path.read_text())
    return groups


def weight(nodeid: str) -> float:
    on_cluster = nodeid.startswith(("tests/integration/", "tests/e2e/"))
    return CLUSTER_TEST_WEIGHT if on_cluster else UNIT_TEST_WEIGHT


def package_of_group(group: str) -> str:
    """A group's folder: a module's, or the group itself (a whole package; a Ray heads group)."""
    return group.rsplit("/", 1)[0] if group.endswith(".py") else group


def items_after(item: pytest.Item) -> list[pytest.Item]:
    """The tests this process will run after ``item``, as far as it knows them: a worker's queue
    (the scheduler sends a group's tests at once, so a group is never cut short here), otherwise
    the rest of the session."""
    session = item.session
    worker = _xdist_worker(item.config)
    if worker is None:
        items = session.items
        return list(items[items.index(item) + 1 :]) if item in items else list(items)
    with worker.torun.lock() as queued:
        indices = [worker.nextitem_index, *queued]
    return [session.items[i] for i in indices if isinstance(i, int)]


def _xdist_worker(config: pytest.Config) -> Any:
    if not hasattr(config, "workerinput"):
        return None
    from xdist.remote import WorkerInteractor

    for plugin in config.pluginmanager.get_plugins():
        if isinstance(plugin, WorkerInteractor):
            return plugin
    return None


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class SuiteScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """loadscope over the suite's groups, longest first, a worker kept in its package."""

        _groups: dict[str, str] | None = None
        _ordered = False

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:  # first called once every worker has collected
                self._groups = _recorded_groups()
            return self._groups.get(nodeid, _module_of_nodeid(nodeid))

        def _assign_work_unit(self, node: Any) -> None:
            if not self._ordered:  # the queue is complete by the first assignment
                self._ordered = True
                self.workqueue = longest_first(self.workqueue)
            previous = list(self.assigned_work.get(node, {}))
            put_package_first(self.workqueue, previous[-1] if previous else None)
            super()._assign_work_unit(node)

    return SuiteScheduling(config, log)


def longest_first(workqueue: OrderedDict[str, dict[str, bool]]) -> OrderedDict[str, dict[str, bool]]:
    """The groups by estimated duration, longest first (ties keep the collection's order)."""
    return OrderedDict(sorted(workqueue.items(), key=lambda unit: -_unit_weight(unit[1])))


def put_package_first(workqueue: OrderedDict[str, dict[str, bool]], last_group: str | None) -> None:
    """Move the first queued group of ``last_group``'s package (a worker's latest) to the front."""
    if last_group is None:
        return
    package = package_of_group(last_group)
    same = next((group for group in workqueue if package_of_group(group) == package), None)
    if same is not None:
        workqueue.move_to_end(same, last=False)


def _unit_weight(nodeids: Iterable[str]) -> float:
    return sum(weight(nodeid) for nodeid in nodeids)


class GroupTimes:
    """What each group and each worker cost, from the reports the controller receives (setup,
    call and teardown of every test), printed after the run: where the wall time went and how
    evenly the workers were loaded."""

    def __init__(self) -> None:
        self.by_group: dict[str, float] = {}
        self.by_worker: dict[str, float] = {}
        self._groups: dict[str, str] = {}

    def add(self, report: pytest.TestReport) -> None:
        if not self._groups:
            self._groups = _recorded_groups()
        group = self._groups.get(report.nodeid, _module_of_nodeid(report.nodeid))
        self.by_group[group] = self.by_group.get(group, 0.0) + report.duration
        node = getattr(report, "node", None)
        worker = getattr(getattr(node, "gateway", None), "id", "main")
        self.by_worker[worker] = self.by_worker.get(worker, 0.0) + report.duration

    def lines(self, top: int = 12) -> list[str]:
        if not self.by_group:
            return []
        lines = [
            "time per worker (tests' setup + call + teardown): "
            + ", ".join(f"{w} {s / 60:.1f} min" for w, s in sorted(self.by_worker.items()))
        ]
        lines.append(f"the {top} costliest groups:")
        ranked = sorted(self.by_group.items(), key=lambda g: -g[1])[:top]
        lines.extend(f"  {seconds / 60:6.1f} min  {group}" for group, seconds in ranked)
        return lines
