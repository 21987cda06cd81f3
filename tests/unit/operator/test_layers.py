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
BELOW = (
    "rayquota.api",
    "rayquota.queueing",
    "rayquota.ports",
    "rayquota.operator",
    "rayquota.pki",
    "rayquota.__version__",
)


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


# ------------------------------------------------------- the ground floor, and the settings' direction

GROUND: dict[str, tuple[str, ...]] = {
    "rayquota/queueing": (),
    "rayquota/environment.py": (),
    "rayquota/api": ("rayquota.queueing",),
    "rayquota/localcluster": ("rayquota.environment", "rayquota.pki", "rayquota.ports"),
}
"""What stands low (a folder, or one module) -> what it may import of rayquota besides itself. The
API models ask nothing of the local control plane (``rayquota crds --k8s-openapi`` fetches
Kubernetes' module through it in the CLI), and the local control plane reads its tool variables
through ``rayquota.environment``, not through the configuration above the operator."""
KUBERNETES_CLIENTS = ("kubernetes", "kubernetes_asyncio", "kr8s", "kopf")
GATHERERS = (
    "rayquota/operator/config.py",
    "rayquota/operator/components.py",
    "rayquota/operator/permissions.py",
)
"""The modules that take the operator's settings whole (``OperatorConfig``); every other part of
the operator takes its own (``RaySettings``, ``QueueConfig``, ...), which live beside it."""


def _ground_modules(place: str) -> list[Path]:
    path = PACKAGE.parent / place
    return [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))


def _own_name(place: str) -> str:
    return place.removesuffix(".py").replace("/", ".")


def test_what_stands_low_imports_nothing_above_it() -> None:
    found = []
    for place, allowed in GROUND.items():
        modules = _ground_modules(place)
        assert modules and all(path.is_file() for path in modules), place  # found where it is
        mine = (_own_name(place), *allowed)
        found += [
            f"{path.relative_to(PACKAGE.parent)}:{line}: imports {name}"
            for path in modules
            for line, name in imported_modules(path.read_text())
            if not any(name == own or name.startswith(own + ".") for own in mine)
        ]
    assert not found, "a module on the ground floor reaches up:\n" + "\n".join(found)


def test_the_engine_imports_no_kubernetes_client() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
        for path in _ground_modules("rayquota/queueing")
        for node in ast.walk(ast.parse(path.read_text()))
        if (
            isinstance(node, ast.Import)
            and any(a.name.split(".")[0] in KUBERNETES_CLIENTS for a in node.names)
        )
        or (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in KUBERNETES_CLIENTS)
    ]
    assert not found, found


def test_only_the_gatherers_import_the_operators_whole_settings() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted(OPERATOR.rglob("*.py"))
        if path.relative_to(PACKAGE.parent).as_posix() not in GATHERERS
        for line, name in imported_modules(path.read_text())
        if name == "rayquota.operator.config"
    ]
    assert not found, "a part of the operator takes the whole OperatorConfig:\n" + "\n".join(found)


# ----------------------------------------------------------------- the engine's rooms (issue #32)

QUEUEING = PACKAGE / "queueing"
QUEUEING_ROOMS = ("values", "quota", "flavors", "preemption", "topology", "engine", "front")
"""The rooms of ``rayquota/queueing``, lowest first: a module imports only from its own room and
the rooms below it. ``values`` are the modules at the package's top (model, policies, decisions,
quantities, ...), ``front`` the package's ``__init__`` and builders, which face its callers."""
QUEUEING_FRONT = {"rayquota.queueing", "rayquota.queueing.builders"}


def queueing_room(module: str) -> str:
    """The room of a ``rayquota.queueing`` module (or of a name imported from it)."""
    if module in QUEUEING_FRONT:
        return "front"
    head = module.removeprefix("rayquota.queueing.").split(".")[0]
    return head if head in QUEUEING_ROOMS else "values"


def queueing_imports(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Every ``rayquota.queueing`` module a source of ``module`` imports, relative ones resolved,
    with its line."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            if node.module is None:
                found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, f"{base}.{node.module}" if base else node.module))
    return sorted(
        (line, name)
        for line, name in found
        if name == "rayquota.queueing" or name.startswith("rayquota.queueing.")
    )


def importing_up(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    mine = QUEUEING_ROOMS.index(queueing_room(module))
    return [
        (line, name)
        for line, name in queueing_imports(source, module, is_package)
        if QUEUEING_ROOMS.index(queueing_room(name)) > mine
    ]


def test_the_room_search_resolves_relative_imports_and_finds_one_from_above() -> None:
    source = (
        "from ..model import PodSet\n"
        "from .cohorts import QuotaNode\n"
        "from ..flavors.assignment import FitMode\n"
        "from .. import engine\n"
        "import rayquota.queueing.topology.fit\n"
        "from rayquota.queueing import Engine\n"
        "from rayquota.api.common import ObjectMeta\n"
    )
    assert importing_up(source, "rayquota.queueing.quota.accounting") == [
        (3, "rayquota.queueing.flavors.assignment"),
        (4, "rayquota.queueing.engine"),
        (5, "rayquota.queueing.topology.fit"),
        (6, "rayquota.queueing"),
    ]
    assert (
        importing_up(
            "from .fit import x\nfrom ..preemption.victims import y\n", "rayquota.queueing.topology", True
        )
        == []
    )
    assert importing_up("from .quota.state import Phase\n", "rayquota.queueing.model") == [
        (1, "rayquota.queueing.quota.state")
    ]


def test_the_engine_rooms_import_only_downwards() -> None:
    paths = sorted(QUEUEING.rglob("*.py"))
    rooms = {queueing_room(_module(path)) for path in paths}
    assert rooms == set(QUEUEING_ROOMS), rooms  # every room is found where it is
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: imports {name} ({queueing_room(name)} is above "
        f"{queueing_room(_module(path))})"
        for path in paths
        for line, name in importing_up(path.read_text(), _module(path), path.name == "__init__.py")
    ]
    assert not found, "a room of the engine reaches up:\n" + "\n".join(found)


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# ------------------------------------------------------------------ folders small enough to see

MAX_FLAT_MODULES = 15
# Folder -> (its modules now, not counting __init__.py, exactly; why it is not split yet).
# None today: the last one, rayquota/operator/core, keeps its informer cache in core/cache/.
CROWDED_FOLDERS: dict[str, tuple[int, str]] = {}


def flat_module_counts() -> dict[str, int]:
    return {
        folder.relative_to(PACKAGE.parent).as_posix(): len(
            [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        )
        for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__")]
    }


def crowding_complaints(counts: dict[str, int], listed: dict[str, tuple[int, str]]) -> list[str]:
    out = [
        f"{folder}: {count} modules flat, over {MAX_FLAT_MODULES}: split it into sub-packages"
        for folder, count in sorted(counts.items())
        if count > MAX_FLAT_MODULES and folder not in listed
    ]
    for folder, (allowed, _why) in sorted(listed.items()):
        count = counts.get(folder, 0)
        if count <= MAX_FLAT_MODULES:
            out.append(f"{folder}: {count} modules, within the limit: remove its entry from CROWDED_FOLDERS")
        elif count != allowed:
            out.append(f"{folder}: {count} modules, listed with {allowed}: split it, or lower its entry")
    return out


def test_the_crowding_rule_catches_a_new_grown_and_shrunk_folder() -> None:
    counts = {"a": 16, "b": 17, "c": 16, "d": 15}
    listed = {"b": (16, "why"), "c": (17, "why"), "d": (16, "why")}
    assert crowding_complaints(counts, listed) == [
        "a: 16 modules flat, over 15: split it into sub-packages",
        "b: 17 modules, listed with 16: split it, or lower its entry",
        "c: 16 modules, listed with 17: split it, or lower its entry",
        "d: 15 modules, within the limit: remove its entry from CROWDED_FOLDERS",
    ]


def test_no_folder_has_more_than_15_modules_flat_unless_listed() -> None:
    counts = flat_module_counts()
    assert counts["rayquota/queueing"] >= 5, counts  # the folders are found where they are
    assert counts["rayquota/operator/core"] >= 5 and counts["rayquota/operator/core/cache"] >= 2, counts
    assert not crowding_complaints(counts, CROWDED_FOLDERS), "\n".join(
        crowding_complaints(counts, CROWDED_FOLDERS)
    )
