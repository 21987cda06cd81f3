"""A kind lives in its integration record only (issue #32): generic queue and webhook code asks
the record what a kind can do (``adapters/capabilities.py``), never switches on a Ray kind's
name. This test reads the generic modules' source for a Ray kind name written as a string."""

from __future__ import annotations

import re
from pathlib import Path

import rayquota

PACKAGE = Path(rayquota.__file__).parent
GENERIC = (PACKAGE / "operator" / "queue", PACKAGE / "operator" / "webhooks")
RECORDS = PACKAGE / "operator" / "queue" / "adapters"
KIND_STRING = re.compile(r"""(["'])(RayCluster|RayJob|RayService|RayCronJob)\1""")


def generic_modules() -> list[Path]:
    return sorted(path for root in GENERIC for path in root.rglob("*.py") if not path.is_relative_to(RECORDS))


def kind_strings(source: str) -> list[tuple[int, str]]:
    return [
        (number, match.group(0))
        for number, line in enumerate(source.splitlines(), 1)
        for match in KIND_STRING.finditer(line)
    ]


def test_the_search_finds_a_kind_string() -> None:
    assert kind_strings('if kind == "RayJob":\n    pass\nx = {"kind": \'RayService\'}') == [
        (1, '"RayJob"'),
        (3, "'RayService'"),
    ]
    assert kind_strings('"""A RayJob\'s cluster, `RayCluster`."""') == []


def test_no_ray_kind_name_in_generic_queue_or_webhook_code() -> None:
    modules = generic_modules()
    assert len(modules) > 20, modules  # the modules are found where they are
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {text}"
        for path in modules
        for number, text in kind_strings(path.read_text())
    ]
    assert not found, "a Ray kind switched on by name outside its record:\n" + "\n".join(found)
