"""The data format of conformance cases: one YAML file per upstream test file, read into values.

A file holds ``source`` (the upstream file and tag the cases come from), optional ``fixtures``
(named setups shared by its cases: namespaces, flavors, cohorts, cluster queues, local queues)
and ``cases``. A case names its upstream ``test`` and ``line``, the fixture it ``uses`` (if
any), what it adds to it, the admitted and pending workloads, how many ``cycles`` to run, and
what to ``expect``. ``unsupported`` (rayquota cannot express the case), ``deliberate``
(rayquota decides differently on purpose) and ``open_difference`` (a known difference not fixed
yet) carry the reason in words. The layout is described
in tests/conformance/README.md; the runner (:mod:`.runner`) never needs editing to add a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rayquota.queueing import RequeuingTimestamp
from rayquota.queueing.quota.fairsharing import FairSharing

CASES_DIR = Path(__file__).resolve().parent / "kueue"

Raw = Mapping[str, Any]


class CaseFormatError(ValueError):
    """A case file says something the format does not allow: the message names the field."""


@dataclass(frozen=True, slots=True)
class Setup:
    """What a case (or a fixture) declares: merged fixture first, then the case's own."""

    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    flavors: list[Any] = field(default_factory=list)
    cohorts: list[Raw] = field(default_factory=list)
    cluster_queues: list[Raw] = field(default_factory=list)
    local_queues: list[str | Raw] = field(default_factory=list)

    def merged(self, other: Setup) -> Setup:
        replaced = {cq["name"] for cq in other.cluster_queues}
        return Setup(
            {**self.namespaces, **other.namespaces},
            [*self.flavors, *other.flavors],
            [*self.cohorts, *other.cohorts],
            [*(cq for cq in self.cluster_queues if cq["name"] not in replaced), *other.cluster_queues],
            [*self.local_queues, *other.local_queues],
        )


@dataclass(frozen=True, slots=True)
class Expectation:
    admitted: dict[str, dict[str, Any]] | None = None
    """Workloads the run admits, each with its flavor per resource (``{cpu: on-demand}``: every
    pod set) or per pod set (``{workers: {cpu: spot}}``). ``None``: not checked."""
    preempted: list[str] | None = None
    """Victims the run evicts (``None``: not checked; ``[]``: none)."""
    pending: list[str] | None = None
    """Workloads still waiting after the run, preemptors included (``None``: not checked)."""
    admitted_in: dict[str, str] | None = None
    """The ClusterQueue of each admission, where a case checks it."""
    reasons: dict[str, str] | None = None
    """The preemption reason of each victim (Kueue's ``InClusterQueue``, ``InCohortReclamation``...)."""
    counts: dict[str, dict[str, int]] | None = None
    """The pod count admitted per pod set (partial admission admits fewer than asked)."""
    order: list[str] | None = None
    """The order the run admits in (Kueue's tests that pop a cycle's entries in order)."""


@dataclass(frozen=True, slots=True)
class Case:
    file: str
    name: str
    test: str
    line: int
    setup: Setup
    admitted: list[Raw]
    pending: list[Raw]
    cycles: int
    expect: Expectation
    fair_sharing: bool | FairSharing = False
    """On with Kueue's default settings (``true``), or with ``{preemptionStrategies: [...]}``."""
    admission_fair_sharing: Raw | None = None
    """Kueue's Configuration ``admissionFairSharing`` (``usageHalfLifeTime`` in seconds,
    ``resourceWeights``); ``None``: not configured."""
    consumed: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The LocalQueues' consumed resources when the run starts (Kueue's usage ledger)."""
    requeuing_timestamp: RequeuingTimestamp = RequeuingTimestamp.EVICTION
    """Kueue's ``waitForPodsReady.requeuingStrategy.timestamp`` (``Eviction`` or ``Creation``): how a
    pending workload ``evicted`` for pods not ready in time is ordered."""
    unsupported: str | None = None
    deliberate: str | None = None
    open_difference: str | None = None
    """A difference not fixed yet (which of the issue's causes): run, and must still differ."""
    assignment: Raw | None = None
    """The preemptor is asked directly with this flavor assignment (``flavors``, the ``preempt``
    resources), as Kueue's preemption tests do; no cycle runs (see :mod:`.preemptor`)."""

    @property
    def cite(self) -> str:
        return f"{self.test} {self.name!r} ({self.file}:{self.line})"


@dataclass(frozen=True, slots=True)
class CaseFile:
    path: Path
    source: str
    cases: list[Case]


_CASE_KEYS = {
    "name",
    "test",
    "line",
    "uses",
    "namespaces",
    "flavors",
    "cohorts",
    "cluster_queues",
    "local_queues",
    "admitted",
    "pending",
    "cycles",
    "expect",
    "fair_sharing",
    "admission_fair_sharing",
    "consumed",
    "requeuing_timestamp",
    "unsupported",
    "deliberate",
    "open_difference",
    "note",
    "assignment",
}
_EXPECT_KEYS = {"admitted", "preempted", "pending", "admitted_in", "reasons", "counts", "order"}


def _setup(raw: Raw, where: str) -> Setup:
    namespaces = raw.get("namespaces") or {}
    if not isinstance(namespaces, dict):
        raise CaseFormatError(f"{where}: namespaces must map a name to its labels, got {namespaces!r}")
    return Setup(
        {str(k): dict(v or {}) for k, v in namespaces.items()},
        list(raw.get("flavors") or []),
        list(raw.get("cohorts") or []),
        list(raw.get("cluster_queues") or []),
        list(raw.get("local_queues") or []),
    )


def _expectation(raw: Raw, where: str) -> Expectation:
    unknown = set(raw) - _EXPECT_KEYS
    if unknown:
        raise CaseFormatError(f"{where}: unknown expect field(s) {sorted(unknown)}")
    admitted = raw.get("admitted")
    if admitted is not None and not isinstance(admitted, dict):
        raise CaseFormatError(f"{where}: expect.admitted must map workload -> flavors, got {admitted!r}")
    return Expectation(
        None if admitted is None else {str(k): dict(v or {}) for k, v in admitted.items()},
        None if raw.get("preempted") is None else [str(k) for k in raw["preempted"]],
        None if raw.get("pending") is None else [str(k) for k in raw["pending"]],
        None if raw.get("admitted_in") is None else {str(k): str(v) for k, v in raw["admitted_in"].items()},
        None if raw.get("reasons") is None else {str(k): str(v) for k, v in raw["reasons"].items()},
        None
        if raw.get("counts") is None
        else {str(k): {str(ps): int(n) for ps, n in v.items()} for k, v in raw["counts"].items()},
        None if raw.get("order") is None else [str(k) for k in raw["order"]],
    )


def _requeuing_timestamp(raw: Any, where: str) -> RequeuingTimestamp:
    try:
        return RequeuingTimestamp(raw)
    except ValueError:
        choices = [t.value for t in RequeuingTimestamp]
        raise CaseFormatError(f"{where}: requeuing_timestamp must be one of {choices}, got {raw!r}") from None


def _fair_sharing(raw: Any, where: str) -> bool | FairSharing:
    if isinstance(raw, bool):
        return raw
    if not isinstance(raw, dict) or set(raw) - {"preemptionStrategies"}:
        raise CaseFormatError(f"{where}: fair_sharing must be true/false or {{preemptionStrategies: [...]}}")
    try:
        return FairSharing.parse(raw.get("preemptionStrategies"))
    except ValueError as error:
        raise CaseFormatError(f"{where}: {error}") from error


def load_file(path: Path) -> CaseFile:
    document = yaml.safe_load(path.read_text())
    if not isinstance(document, dict) or "cases" not in document:
        raise CaseFormatError(f"{path.name}: expected a mapping with 'source' and 'cases'")
    source = str(document.get("source", ""))
    fixtures = {
        name: _setup(raw, f"{path.name} fixture {name}")
        for name, raw in (document.get("fixtures") or {}).items()
    }
    cases: list[Case] = []
    seen: set[str] = set()
    for index, raw in enumerate(document["cases"]):
        where = f"{path.name} case #{index} {raw.get('name')!r}"
        unknown = set(raw) - _CASE_KEYS
        if unknown:
            raise CaseFormatError(f"{where}: unknown field(s) {sorted(unknown)}")
        for required in ("name", "test", "line"):
            if required not in raw:
                raise CaseFormatError(f"{where}: field {required!r} is required")
        if raw["name"] in seen:
            raise CaseFormatError(f"{where}: duplicate case name")
        seen.add(raw["name"])
        base = Setup()
        if raw.get("uses"):
            if raw["uses"] not in fixtures:
                raise CaseFormatError(f"{where}: uses unknown fixture {raw['uses']!r}")
            base = fixtures[raw["uses"]]
        if "expect" not in raw and "unsupported" not in raw:
            raise CaseFormatError(f"{where}: a case needs 'expect' (or 'unsupported' with the reason)")
        cases.append(
            Case(
                file=source or path.name,
                name=str(raw["name"]),
                test=str(raw["test"]),
                line=int(raw["line"]),
                setup=base.merged(_setup(raw, where)),
                admitted=list(raw.get("admitted") or []),
                pending=list(raw.get("pending") or []),
                cycles=int(raw.get("cycles", 1)),
                expect=_expectation(raw.get("expect") or {}, where),
                fair_sharing=_fair_sharing(raw.get("fair_sharing", False), where),
                admission_fair_sharing=raw.get("admission_fair_sharing"),
                consumed={str(k): dict(v or {}) for k, v in (raw.get("consumed") or {}).items()},
                requeuing_timestamp=_requeuing_timestamp(raw.get("requeuing_timestamp", "Eviction"), where),
                unsupported=raw.get("unsupported"),
                deliberate=raw.get("deliberate"),
                open_difference=raw.get("open_difference"),
                assignment=raw.get("assignment"),
            )
        )
    return CaseFile(path, source, cases)


def load_all(directory: Path = CASES_DIR) -> list[CaseFile]:
    return [load_file(path) for path in sorted(directory.glob("*.yaml"))]
