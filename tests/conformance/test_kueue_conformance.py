"""Kueue's own scheduler and flavor-assigner table cases, run through rayquota's engine.

Every case in tests/conformance/kueue/*.yaml is one test: it passes when rayquota decides as
Kueue does; a ``deliberate`` case passes while rayquota still decides differently (the reason is
in docs/kueue-api-mode.md), so a change that makes it agree says so, and so does an
``open_difference`` case (a known difference still to fix); an ``unsupported`` case is
skipped with its reason. ``test_counts`` prints the tally and holds the suite to its size.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from .cases import Case, load_all
from .runner import differences, run

FILES = load_all()
CASES = [case for f in FILES for case in f.cases]
DOC = Path(__file__).resolve().parents[2] / "docs" / "kueue-api-mode.md"

MIN_CASES = 242
"""The suite never shrinks below this many cases (raised as cases are ported)."""


@pytest.mark.parametrize("case", CASES, ids=[f"{c.test}:{c.line}:{c.name}" for c in CASES])
def test_case(case: Case) -> None:
    if case.unsupported:
        pytest.skip(f"unsupported: {case.unsupported}")
    found = differences(case, run(case))
    mark = "deliberate" if case.deliberate else "open_difference" if case.open_difference else None
    if mark is not None:
        assert found, f"{case.cite} is marked {mark} but now agrees with Kueue: drop the mark"
        return
    assert not found, f"{case.cite} differs from Kueue:\n  " + "\n  ".join(found)


def test_counts() -> None:
    tally: Counter[str] = Counter()
    for case in CASES:
        if case.unsupported:
            tally["unsupported"] += 1
        elif case.deliberate:
            tally["deliberate"] += 1
        elif case.open_difference:
            tally["open difference"] += 1
        else:
            tally["agreeing"] += 1
    per_file = ", ".join(f"{f.path.name}: {len(f.cases)}" for f in FILES)
    print(f"\nKueue conformance: {len(CASES)} cases ({per_file}); {dict(tally)}")
    assert len(CASES) >= MIN_CASES


def test_differences_are_documented() -> None:
    """Every case rayquota cannot express or decides differently on purpose is named in the docs."""
    doc = DOC.read_text()
    marked = [c for c in CASES if c.unsupported or c.deliberate or c.open_difference]
    missing = [c.cite for c in marked if c.name not in doc]
    assert not missing, "not listed in docs/kueue-api-mode.md:\n  " + "\n  ".join(missing)


def test_every_case_cites_its_source() -> None:
    assert all(c.file.startswith("pkg/") and c.line > 0 and c.test.startswith("Test") for c in CASES)
