"""A kind lives in its integration record only (issue #32): generic queue and webhook code asks
the record what a kind can do (``adapters/capabilities.py``), never switches on a kind. This
test reads the generic modules for a Ray kind's name written as a string, and for a comparison
against a name that stands for a kind (``kind == CLUSTER_KIND``, ``queued.kind == JOB_KIND``,
``kind in (RAYJOB_KIND, ...)``, ``kind == RayClusterAdapter.kind``)."""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import rayquota
from rayquota.operator.queue.adapters import ADAPTERS, BESIDE_KUBERAY

PACKAGE = Path(rayquota.__file__).parent
GENERIC = (PACKAGE / "operator" / "queue", PACKAGE / "operator" / "webhooks")
RECORDS = PACKAGE / "operator" / "queue" / "adapters"
RAY_KINDS = ("RayCluster", "RayJob", "RayService", "RayCronJob")
KIND_STRING = re.compile(rf"""(["'])({"|".join(RAY_KINDS)})\1""")
# The kinds a name must not stand for in a comparison: every registered kind, and the Ray kinds.
KINDS = frozenset({*ADAPTERS, *BESIDE_KUBERAY, *RAY_KINDS})
COMPARISONS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)
UNRESOLVED = object()


def generic_modules() -> list[Path]:
    return sorted(path for root in GENERIC for path in root.rglob("*.py") if not path.is_relative_to(RECORDS))


def kind_strings(source: str) -> list[tuple[int, str]]:
    return [
        (number, match.group(0))
        for number, line in enumerate(source.splitlines(), 1)
        for match in KIND_STRING.finditer(line)
    ]


def _resolved(node: ast.expr, namespace: Mapping[str, Any]) -> Any:
    """The value of a module-level name or a dotted path from one (``CLUSTER_KIND``,
    ``RayClusterAdapter.kind``, ``JOB_PODS.owner_kind``); UNRESOLVED for anything else."""
    if isinstance(node, ast.Name):
        return namespace.get(node.id, UNRESOLVED)
    if isinstance(node, ast.Attribute):
        base = _resolved(node.value, namespace)
        return UNRESOLVED if base is UNRESOLVED else getattr(base, node.attr, UNRESOLVED)
    return UNRESOLVED


def _operands(node: ast.expr) -> list[ast.expr]:
    """A comparison's operand, or the elements of a tuple, list or set written in place."""
    return list(node.elts) if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]


def kind_comparisons(
    source: str, namespace: Mapping[str, Any], kinds: Collection[str]
) -> list[tuple[int, str]]:
    """Comparisons against a name that, in the module's ``namespace``, stands for one of
    ``kinds``: (line, the comparison as written)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare) or not any(isinstance(op, COMPARISONS) for op in node.ops):
            continue
        operands = [o for side in (node.left, *node.comparators) for o in _operands(side)]
        if any(_resolved(o, namespace) in kinds for o in operands if isinstance(o, ast.Name | ast.Attribute)):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def _namespace(path: Path) -> dict[str, Any]:
    name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    return vars(importlib.import_module(name))


def test_the_search_finds_a_kind_string() -> None:
    assert kind_strings('if kind == "RayJob":\n    pass\nx = {"kind": \'RayService\'}') == [
        (1, '"RayJob"'),
        (3, "'RayService'"),
    ]
    assert kind_strings('"""A RayJob\'s cluster, `RayCluster`."""') == []


class _Record:
    kind = "RayCluster"


def test_the_search_finds_a_comparison_against_a_kind_constant() -> None:
    namespace = {"CLUSTER_KIND": "RayCluster", "JOB_KIND": "Job", "Record": _Record, "OTHER_KIND": "Secret"}
    source = "\n".join(
        (
            "if kind == CLUSTER_KIND and is_child(obj):",
            "    pass",
            "if queued.kind != JOB_KIND: pass",
            "x = ref.get('kind') in (OTHER_KIND, CLUSTER_KIND)",
            "y = kind == Record.kind",
            "z = kind == OTHER_KIND or informers[CLUSTER_KIND] is None",  # another kind; an index
            "w = owner.kind in kinds",  # a local: what it holds is not known here
        )
    )
    assert kind_comparisons(source, namespace, {"RayCluster", "Job"}) == [
        (1, "kind == CLUSTER_KIND"),
        (3, "queued.kind != JOB_KIND"),
        (4, "ref.get('kind') in (OTHER_KIND, CLUSTER_KIND)"),
        (5, "kind == Record.kind"),
    ]


def test_no_kind_switch_in_generic_queue_or_webhook_code() -> None:
    modules = generic_modules()
    assert len(modules) > 20, modules  # the modules are found where they are
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {text}"
        for path in modules
        for number, text in kind_strings(path.read_text())
    ]
    assert not found, "a Ray kind switched on by name outside its record:\n" + "\n".join(found)
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {text}"
        for path in modules
        for number, text in kind_comparisons(path.read_text(), _namespace(path), KINDS)
    ]
    assert not found, (
        "a kind switched on by a constant outside its record (ask the record instead: a capability in "
        "adapters/capabilities.py, or a member of KindAdapter):\n" + "\n".join(found)
    )
