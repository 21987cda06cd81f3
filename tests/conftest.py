"""Shared fixtures: the real local control plane, CRDs, and a namespace per test."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

from tests import scheduling
from tests.polling import wait_for

if TYPE_CHECKING:
    from tests.integration.ray.rayhead import RayHead

# Property tests judge behaviour, not speed: on a busy 2-core machine (CI) one example can take
# longer than hypothesis's 200 ms deadline, which would fail a correct test.
settings.register_profile("rayquota-suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rayquota-suite")

REPO = Path(__file__).resolve().parent.parent
# A minimal JobSet CRD (no JobSet controller runs here: tests/jobset_controller.py plays it).
JOBSET_CRD = REPO / "tests" / "integration" / "queue" / "fixtures" / "jobset-crd.yaml"
# The process's Ray head once started: stopped right after the last test of this process that uses it.
SHARED_RAY_HEAD = pytest.StashKey["RayHead"]()
RUN_DIR = pytest.StashKey[Path]()  # made by this process (the run's first): removed at its end
RUN_DIR_ENV = scheduling.RUN_DIR_ENV
GROUP_TIMES = scheduling.GroupTimes()  # the controller's (or a lone process's) view of the run


def pytest_configure(config: pytest.Config) -> None:
    """The run's folder, shared with the xdist workers (they inherit the environment)."""
    if RUN_DIR_ENV not in os.environ:
        run_dir = Path(tempfile.mkdtemp(prefix="rayquota-test-run-"))
        os.environ[RUN_DIR_ENV] = str(run_dir)
        config.stash[RUN_DIR] = run_dir


def pytest_unconfigure(config: pytest.Config) -> None:
    run_dir = config.stash.get(RUN_DIR, None)
    if run_dir is not None:
        shutil.rmtree(run_dir, ignore_errors=True)
        os.environ.pop(RUN_DIR_ENV, None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO / "tests").parts
        if parts and parts[0] in ("integration", "e2e"):
            item.add_marker(getattr(pytest.mark, parts[0]))


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reports its collection to the controller
def pytest_collection_finish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        scheduling.record_groups(session.items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadscope` (as `make test` runs): the suite's groups and order (tests/scheduling.py)."""
    if config.getoption("dist") == "loadscope":
        return scheduling.make_scheduler(config, log)
    return None


@pytest.fixture(scope="session")
def control_plane() -> Iterator[object]:
    """One control plane per test run.

    Each run gets its own cluster name (so concurrent runs never share or stop each
    other's cluster) unless RAYQUOTA_TEST_CLUSTER names an existing one to reuse, which
    is then left running.
    """
    from rayquota.localcluster.cluster import LocalCluster

    reuse = os.environ.get("RAYQUOTA_TEST_CLUSTER")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if reuse and workers > 1:
        raise pytest.UsageError(
            f"RAYQUOTA_TEST_CLUSTER={reuse} with {workers} xdist workers: their operators would share "
            "one cluster's ClusterQueues; reuse a cluster with one process (no -n)"
        )
    cluster = LocalCluster(name=reuse or f"pytest-{os.getpid()}")
    cluster.up()
    # CRDs go in at once: the garbage collector discovers new resource types on a 30 s
    # period, so installing them early lets ownerReference cascades work by the time
    # the first test deletes a custom resource. JobSet's (another project's, which rayquota
    # never installs) too: a JobSet's Jobs go with it, and every operator the tests start
    # watches JobSets from its start (one started before the CRD waits up to 2 minutes).
    from rayquota.localcluster.install import install_crds

    install_crds(cluster)
    cluster.kubectl("apply", "-f", str(JOBSET_CRD))
    cluster.kubectl("wait", "--for=condition=Established", "crd/jobsets.jobset.x-k8s.io", "--timeout=60s")
    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(cluster.kubeconfig)
    try:
        yield cluster
    finally:
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous
        if not reuse:
            cluster.down(quiet=True, purge=True)


@pytest.fixture(scope="session")
def ray_head(request: pytest.FixtureRequest) -> Iterator[RayHead]:
    """One real Ray head on loopback, shared by every test of the run that needs one (directly or
    through another fixture), and stopped as soon as the last of them is done, not at the end of
    the run; every process of it is gone afterwards."""
    from tests.integration.ray.rayhead import RayHead

    head = RayHead()
    head.shared = True
    head.start()
    request.config.stash[SHARED_RAY_HEAD] = head
    try:
        yield head
    finally:
        _stop_shared_ray_head(request.config)


def _stop_shared_ray_head(config: pytest.Config) -> None:
    head = config.stash.get(SHARED_RAY_HEAD, None)
    if head is None:
        return
    del config.stash[SHARED_RAY_HEAD]
    head.stop()
    leftovers = head.processes()
    assert not leftovers, f"Ray processes left behind: {[p.pid for p in leftovers]}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    from tests.integration.ray.rayhead import set_current_test

    set_current_test(item)  # a Ray head it starts must be declared (tests/integration/ray/rayhead.py)
    try:
        yield
    finally:
        set_current_test(None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    yield  # the test's own fixtures (and a module's, at its last test) are torn down first
    if SHARED_RAY_HEAD not in item.config.stash:
        return
    if not _ray_head_needed_after(item):
        _stop_shared_ray_head(item.config)
    elif "ray_head" in getattr(item, "fixturenames", ()):
        # Shared, so cleaned: the next test sees no Serve application of this one (as on a fresh
        # head), and no replica of it keeps a core busy.
        item.config.stash[SHARED_RAY_HEAD].remove_serve_applications()


def _ray_head_needed_after(item: pytest.Item) -> bool:
    """Whether a test this process still runs uses the head (under xdist: this worker's queue)."""
    return any(scheduling.uses_a_ray_head(later) for later in scheduling.items_after(item))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    GROUP_TIMES.add(report)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if hasattr(terminalreporter.config, "workerinput"):
        return
    for line in GROUP_TIMES.lines():
        terminalreporter.write_line(line)
    from tests.integration.ray.rayhead import most_alive_in_run

    most = most_alive_in_run()
    if most:
        terminalreporter.write_line(f"real Ray heads alive at once: at most {most}")


@pytest.fixture(scope="session")
def crds_installed(control_plane: object) -> None:
    from rayquota.localcluster.install import install_crds

    install_crds(control_plane)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def kube_api(control_plane: object) -> Iterator[object]:
    from kubernetes import config

    client = config.new_client_from_config(config_file=str(control_plane.kubeconfig))  # type: ignore[attr-defined]
    try:
        yield client
    finally:
        client.close()


def _namespace_name(prefix: str, test_name: str) -> str:
    stem = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    return f"{prefix}-{stem}-{secrets.token_hex(3)}"


@pytest.fixture
def namespace_prefix() -> str:
    """Prefix of test namespaces; a folder overrides it to scope an operator it runs (e.g. "ray-*")."""
    return "t"


@pytest.fixture
def namespace(control_plane: object, namespace_prefix: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace with its default service account, deleted after the test."""
    from tests.direct_api import made_namespace, namespace_deleted
    from tests.integration.ray.kubehelpers import Kube

    name = _namespace_name(namespace_prefix, request.node.name)
    kubectl = control_plane.kubectl  # type: ignore[attr-defined]
    if not made_namespace(control_plane, name):
        kubectl("create", "namespace", name)
    wait_for(
        f"namespace {name}: its default service account",
        lambda: Kube(control_plane, name).get("serviceaccount", "default") is not None,  # type: ignore[arg-type]
        timeout_s=30,
        interval_s=0.1,
    )
    try:
        yield name
    finally:
        if not namespace_deleted(control_plane, name):
            kubectl("delete", "namespace", name, "--wait=false", check=False)
