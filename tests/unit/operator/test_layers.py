"""The operator is a layer (issue #32): it imports only what lies below it (the API models, the
engine, the ports) and itself. The composition root above it (``rayquota.app``) builds the
operator's components, the dashboard and the servers and hands each its handles; nothing under
``rayquota/operator`` reaches up to the dashboard, the CLI, the local control plane or the dev tools."""

from __future__ import annotations

import ast
from pathlib import Path

import rayquota

PACKAGE = Path(rayquota.__file__).parent
OPERATOR = PACKAGE / "operator"
BELOW = ("rayquota.api", "rayquota.queueing", "rayquota.ports", "rayquota.operator", "rayquota.pki",
         "rayquota.__version__")


def imported_modules(source: str) -> list[tuple[int, str]]:
    """Every rayquota module a source imports, with its line (`from rayquota import x` as `rayquota.x`)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "rayquota":
                found += [(node.lineno, f"rayquota.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return sorted((line, name) for line, name in found if name == "rayquota" or name.startswith("rayquota."))


def reaching_up(source: str) -> list[tuple[int, str]]:
    return [
        (line, name)
        for line, name in imported_modules(source)
        if not any(name == below or name.startswith(below + ".") for below in BELOW)
    ]


def test_the_search_finds_an_import_from_above() -> None:
    source = (
        "from rayquota.dashboard.server import Dashboard\n"
        "import rayquota.app.main\n"
        "from rayquota import devtools, queueing\n"
        "def f() -> None:\n"
        "    from rayquota.localcluster import cluster\n"
        "from rayquota.operator.core import Manager\n"
        "from rayquota.api.common import ObjectMeta\n"
        "from rayquota.operatorx import y\n"
    )
    assert reaching_up(source) == [
        (1, "rayquota.dashboard.server"),
        (2, "rayquota.app.main"),
        (3, "rayquota.devtools"),
        (5, "rayquota.localcluster"),
        (8, "rayquota.operatorx"),
    ]


def test_nothing_under_the_operator_imports_from_above_it() -> None:
    modules = sorted(OPERATOR.rglob("*.py"))
    assert len(modules) > 100, modules  # the modules are found where they are
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: imports {name}"
        for path in modules
        for line, name in reaching_up(path.read_text())
    ]
    assert not found, "the operator reaches up a layer:\n" + "\n".join(found)
