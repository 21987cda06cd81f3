"""The operator for the RayCronJob tests: in a thread on `qcron-*` namespaces, the RayCronJob
controller on a ManualClock the tests move. Package-scoped, like every folder's operator: it
stops when this folder ends, so it never writes the status of another folder's ClusterQueues."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from rayquota.operator.config import OperatorConfig
from tests.manual_clock import ManualClock
from tests.operator_thread import operator_thread

PREFIX = "qcron"


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


@pytest.fixture(scope="package")
def clock() -> ManualClock:
    return ManualClock(dt.datetime.now(dt.UTC))


@pytest.fixture(scope="package")
def cron_operator(crds_installed: None, clock: ManualClock) -> Iterator[None]:
    with operator_thread(OperatorConfig(version="test-1"), [f"{PREFIX}-*"], clock=clock):
        yield
