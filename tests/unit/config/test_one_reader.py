"""No module under the operator or the engine reads the process environment on its own: the
configuration is read once by `rayquota.config` at start and passed in. And nothing under
`rayquota/operator` imports the dashboard or the composition root above it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "rayquota"
SCANNED = ("operator", "queueing")
# The entry point and the composition root read the process environment (the overrides, $TZ); they
# live outside the scanned packages. Inside, two reads that are no setting of rayquota's:
ALLOWED = frozenset(
    {
        "rayquota/operator/kube.py",  # $KUBECONFIG: where the credentials are, as kubectl reads it
        "rayquota/operator/ray/localhead.py",  # dev-only: a local Ray head inherits this environment
    }
)
ABOVE_THE_OPERATOR = ("rayquota.dashboard", "rayquota.app", "rayquota.config", "rayquota.cli")


def _modules() -> list[tuple[str, ast.Module]]:
    found = []
    for package in SCANNED:
        for path in sorted((PACKAGE / package).rglob("*.py")):
            relative = str(path.relative_to(PACKAGE.parent))
            found.append((relative, ast.parse(path.read_text(), relative)))
    return found


def _environment_reads(tree: ast.Module) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
            lines.append(node.lineno)
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(alias.name in ("environ", "getenv") for alias in node.names)
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_no_module_reads_the_environment_on_its_own() -> None:
    readers = {
        f"{name}:{line}"
        for name, tree in _modules()
        if name not in ALLOWED
        for line in _environment_reads(tree)
    }
    assert readers == set()


def test_the_check_finds_a_read() -> None:
    assert _environment_reads(ast.parse("import os\nX = os.environ.get('A')\nY = os.getenv('B')")) == [2, 3]


def test_nothing_under_the_operator_imports_what_sits_above_it() -> None:
    upward = set()
    for name, tree in _modules():
        if not name.startswith("rayquota/operator/"):
            continue
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            upward |= {f"{name} -> {t}" for t in targets if t.startswith(ABOVE_THE_OPERATOR)}
    assert upward == set()
