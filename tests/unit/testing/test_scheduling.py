"""How `make test` groups and orders the suite for its xdist workers (tests/scheduling.py), and the
run-wide count of live Ray heads (tests/integration/ray/rayhead.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import scheduling
from tests.integration.ray import rayhead

TESTS = scheduling.TESTS


@dataclass
class FakeItem:
    """What the grouping reads of a collected test."""

    nodeid: str
    fixturenames: tuple[str, ...] = ()
    markers: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None

    @property
    def path(self) -> Path:
        return TESTS.parent / self.nodeid.split("::", 1)[0]


def test_modules_with_ray_heads_go_whole_into_the_two_head_groups_and_other_modules_are_their_own() -> None:
    items = [
        FakeItem("tests/integration/ray/test_a.py::test_no_head"),
        FakeItem("tests/integration/ray/test_a.py::test_head", ("namespace", "ray_head")),
        FakeItem("tests/integration/queue/test_b.py::test_head", ("ray_head",)),
        FakeItem("tests/integration/queue/test_b2.py::test_shared", ("ray_head",)),
        FakeItem("tests/integration/queue/test_b2.py::test_upgrade", ("ray_head", "second_ray_head")),
        FakeItem("tests/integration/queue/test_c.py::test_x"),
        FakeItem("tests/integration/queue/test_c.py::test_y"),
        FakeItem("tests/integration/autoscaler/test_e.py::test_own_head", markers=("starts_ray_heads",)),
        FakeItem("tests/integration/ray/test_f.py::test_own_head", markers=("starts_ray_heads",)),
        FakeItem("tests/integration/ray/test_f.py::test_shared", ("ray_head",)),
        FakeItem("tests/unit/test_d.py::test_z", ("ray_head",)),  # no cluster: not in a head group
    ]
    groups = scheduling.groups_of(items)  # type: ignore[arg-type]
    assert groups == {
        "tests/integration/ray/test_a.py::test_no_head": "ray-heads-shared",
        "tests/integration/ray/test_a.py::test_head": "ray-heads-shared",
        "tests/integration/queue/test_b.py::test_head": "ray-heads-shared",
        "tests/integration/queue/test_b2.py::test_shared": "ray-heads-extra",
        "tests/integration/queue/test_b2.py::test_upgrade": "ray-heads-extra",
        "tests/integration/queue/test_c.py::test_x": "tests/integration/queue/test_c.py",
        "tests/integration/queue/test_c.py::test_y": "tests/integration/queue/test_c.py",
        "tests/integration/autoscaler/test_e.py::test_own_head": "ray-heads-own",
        "tests/integration/ray/test_f.py::test_own_head": "ray-heads-extra",  # beside the shared head
        "tests/integration/ray/test_f.py::test_shared": "ray-heads-extra",
        "tests/unit/test_d.py::test_z": "tests/unit/test_d.py",
    }


def test_a_head_a_control_plane_test_does_not_declare_fails_whichever_worker_runs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(scheduling.RUN_DIR_ENV, raising=False)
    monkeypatch.setattr(rayhead.RayHead, "alive", set())
    monkeypatch.setattr(rayhead.RayHead, "most_alive", 0)
    shared_user = FakeItem("tests/integration/ray/test_a.py::t", ("ray_head",))
    extra_user = FakeItem("tests/integration/ray/test_a.py::t", ("ray_head", "second_ray_head"))
    own_heads = FakeItem("tests/integration/ray/test_f.py::t", markers=("starts_ray_heads",))
    silent = FakeItem("tests/integration/ray/test_g.py::t")
    unit = FakeItem("tests/unit/test_d.py::t")
    shared, extra = rayhead.RayHead(), rayhead.RayHead()
    shared.shared = True
    try:
        for item, head, declared in [
            (shared_user, shared, True),
            (shared_user, extra, False),  # a second head where only the shared one is declared
            (extra_user, extra, True),
            (own_heads, extra, True),
            (silent, shared, False),
            (silent, extra, False),
            (unit, extra, True),  # no control plane: not in a group, not checked
        ]:
            rayhead.set_current_test(item)  # type: ignore[arg-type]
            if declared:
                head._check_declared()
            else:
                with pytest.raises(rayhead.UndeclaredRayHead, match="starts_ray_heads"):
                    head._check_declared()
    finally:
        rayhead.set_current_test(None)


def test_a_package_that_asks_for_it_is_one_group() -> None:
    # imported as pytest imports them (the flag is read from the imported conftest)
    import tests.integration.faults.conftest
    import tests.integration.multicluster.conftest  # noqa: F401

    items = [
        FakeItem("tests/integration/faults/test_one.py::test_a"),
        FakeItem("tests/integration/faults/test_two.py::test_b"),
        FakeItem("tests/integration/multicluster/test_three.py::test_c"),
    ]
    assert set(scheduling.groups_of(items).values()) == {  # type: ignore[arg-type]
        "tests/integration/faults",
        "tests/integration/multicluster",
    }


def _queue(*groups: tuple[str, list[str]]) -> OrderedDict[str, dict[str, bool]]:
    return OrderedDict((group, dict.fromkeys(nodeids, False)) for group, nodeids in groups)


def test_groups_go_out_longest_first_and_a_worker_stays_in_its_package() -> None:
    queue = _queue(
        ("tests/unit/test_u.py", [f"tests/unit/test_u.py::t{i}" for i in range(100)]),  # 100 x 0.05 s
        ("tests/integration/queue/test_q1.py", ["tests/integration/queue/test_q1.py::t"]),
        ("tests/integration/ray/test_r.py", [f"tests/integration/ray/test_r.py::t{i}" for i in (1, 2)]),
        ("tests/integration/queue/test_q2.py", ["tests/integration/queue/test_q2.py::t"]),
    )
    ordered = scheduling.longest_first(queue)
    assert list(ordered) == [
        "tests/integration/ray/test_r.py",
        "tests/integration/queue/test_q1.py",
        "tests/integration/queue/test_q2.py",
        "tests/unit/test_u.py",
    ]
    scheduling.put_package_first(ordered, "tests/integration/queue/test_q0.py")
    assert next(iter(ordered)) == "tests/integration/queue/test_q1.py"
    scheduling.put_package_first(ordered, "tests/integration/faults")  # nothing of it left: no change
    assert next(iter(ordered)) == "tests/integration/queue/test_q1.py"


def test_a_fifth_ray_head_in_the_run_is_refused_counting_other_processes_and_not_dead_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(scheduling.RUN_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(rayhead.RayHead, "alive", set())  # this process's count, left as it was
    monkeypatch.setattr(rayhead.RayHead, "most_alive", 0)
    # another worker: alive until its stdin closes
    python = sys.executable
    other_worker = subprocess.Popen([python, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    gone = subprocess.run([python, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    try:
        assert rayhead.MAX_ALIVE == 4
        for n in (1, 2, 3):  # other workers' three heads, alive
            (tmp_path / f"ray-head-{other_worker.pid}-{n}").touch()
        (tmp_path / f"ray-head-{int(gone.stdout)}-1").touch()  # a crashed worker's: not counted
        first, second = rayhead.RayHead(), rayhead.RayHead()
        first._count_in()
        try:
            assert rayhead.most_alive_in_run() == 4
            with pytest.raises(rayhead.TooManyRayHeads, match="5th alive at once in this run"):
                second._count_in()
        finally:
            first._count_out()
        assert not list(tmp_path.glob(f"ray-head-{os.getpid()}-*"))
        second._count_in()  # three alive elsewhere, none here: a fourth is allowed
        second._count_out()
    finally:
        assert other_worker.stdin is not None
        other_worker.stdin.close()
        other_worker.wait(timeout=30)
