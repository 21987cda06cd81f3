"""Rooms small enough to see (issue #32): no module under ``rayquota/`` over 500 lines, no
function over 80. The functions still over 80 are listed with their exact length: a listed one
that grows fails, one that shrinks fails until its number is lowered to its new length (so the
allowance cannot grow back), and one at or under 80 (or gone) is taken off the list, so the list
only gets shorter."""

from __future__ import annotations

import ast
from pathlib import Path

import rayquota

PACKAGE = Path(rayquota.__file__).parent
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
REMOVE_ENTRY = "remove its entry from LONG_FUNCTIONS"

# "module path::qualified name" -> its length in lines now (exactly: shorter or longer fails).
LONG_FUNCTIONS: dict[str, int] = {}


def function_lengths(source: str) -> dict[str, int]:
    """Each function's and method's length in lines, from its ``def`` line to its last (its
    decorators not counted), by qualified name (``Class.method``, ``outer.inner``)."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                lengths[name] = (child.end_lineno or child.lineno) - child.lineno + 1
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return lengths


def modules() -> list[Path]:
    found = sorted(PACKAGE.rglob("*.py"))
    assert len(found) > 100, found  # the package is found where it is
    return found


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def all_function_lengths() -> dict[str, int]:
    return {
        f"{_name(path)}::{name}": length
        for path in modules()
        for name, length in function_lengths(path.read_text()).items()
    }


def size_complaints(lengths: dict[str, int], allowed: dict[str, int]) -> list[str]:
    """What breaks the rule: a function over the limit not listed, a listed one longer than
    listed, a listed one shorter than listed (its number to lower), and a listed one now within
    the limit or gone (its entry to remove)."""
    out: list[str] = []
    for name, length in sorted(lengths.items()):
        if length <= MAX_FUNCTION_LINES:
            continue
        if name not in allowed:
            out.append(f"{name}: {length} lines, over {MAX_FUNCTION_LINES}: split it")
        elif length > allowed[name]:
            out.append(
                f"{name}: {length} lines, grown from {allowed[name]} (listed): split it, do not grow it"
            )
        elif length < allowed[name]:
            out.append(
                f"{name}: {length} lines, shorter than {allowed[name]} (listed): "
                f"lower its entry in LONG_FUNCTIONS to {length}"
            )
    for name in sorted(allowed):
        length = lengths.get(name)
        if length is None:
            out.append(f"{name}: listed but gone: {REMOVE_ENTRY}")
        elif length <= MAX_FUNCTION_LINES:
            out.append(f"{name}: {length} lines now, within {MAX_FUNCTION_LINES}: {REMOVE_ENTRY}")
    return out


def test_lengths_are_measured_per_function_from_def_to_last_line() -> None:
    source = "\n".join(
        (
            "@decorator",
            "def outer(x):",
            "    def inner():",
            "        return x",
            "    return inner",
            "class Kind:",
            "    async def run(self):",
            '        """Doc."""',
            "",
            "        return 1",
        )
    )
    assert function_lengths(source) == {"outer": 4, "outer.inner": 2, "Kind.run": 4}


def test_the_complaints_name_a_new_long_function_a_grown_one_and_an_entry_to_remove() -> None:
    allowed = {"a.py::grown": 90, "a.py::exact": 85, "a.py::short_now": 100, "a.py::gone": 85}
    lengths = {"a.py::new": 81, "a.py::grown": 91, "a.py::exact": 85, "a.py::short_now": 80, "a.py::ok": 80}
    assert size_complaints(lengths, allowed) == [
        "a.py::grown: 91 lines, grown from 90 (listed): split it, do not grow it",
        "a.py::new: 81 lines, over 80: split it",
        "a.py::gone: listed but gone: remove its entry from LONG_FUNCTIONS",
        "a.py::short_now: 80 lines now, within 80: remove its entry from LONG_FUNCTIONS",
    ]


def test_a_listed_function_that_shrank_but_is_still_over_80_asks_for_its_number_lowered() -> None:
    allowed = {"a.py::shrunk": 95, "a.py::exact": 90}
    lengths = {"a.py::shrunk": 81, "a.py::exact": 90}
    assert size_complaints(lengths, allowed) == [
        "a.py::shrunk: 81 lines, shorter than 95 (listed): lower its entry in LONG_FUNCTIONS to 81",
    ]
    assert size_complaints(lengths, {**allowed, "a.py::shrunk": 81}) == []


def test_no_module_over_500_lines() -> None:
    long_modules = [
        f"{_name(path)}: {lines} lines"
        for path in modules()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert not long_modules, f"modules over {MAX_MODULE_LINES} lines (split them):\n" + "\n".join(
        long_modules
    )


def test_no_function_over_80_lines_but_the_listed_ones_none_longer_than_listed() -> None:
    complaints = size_complaints(all_function_lengths(), LONG_FUNCTIONS)
    assert not complaints, "\n".join(complaints)
