"""No module of rayquota reads the process environment on its own: the configuration module
(`rayquota/config`, through `rayquota/environment.py`) reads it once at start and the values are
passed in. Outside it, only the reads
listed in ALLOWED, each a variable that is no rayquota setting, with the reason it must be read where
it is. And nothing under `rayquota/operator` imports the dashboard or the composition root above it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "rayquota"
READERS = ("rayquota/config/", "rayquota/environment.py")
WHOLE = "*"  # the whole environment (handed to a child process), not one variable
_CHILD = "a child process inherits the environment (PATH, HOME, proxies) with a few values set"
_KUBECONFIG = "$KUBECONFIG: where the credentials are, as kubectl and the client library read it"
_IN_CLUSTER = "$KUBECONFIG or $KUBERNETES_SERVICE_HOST: is there an API server to talk to (a pod's)"
ALLOWED: dict[tuple[str, str], str] = {
    ("rayquota/operator/kube.py", "KUBECONFIG"): _KUBECONFIG,
    ("rayquota/cli.py", "KUBECONFIG"): _KUBECONFIG,
    ("rayquota/app/main.py", "KUBECONFIG"): _IN_CLUSTER,
    ("rayquota/app/main.py", "KUBERNETES_SERVICE_HOST"): _IN_CLUSTER,
    ("rayquota/dashboard/main.py", "KUBECONFIG"): _IN_CLUSTER,
    ("rayquota/dashboard/main.py", "KUBERNETES_SERVICE_HOST"): _IN_CLUSTER,
    (
        "rayquota/localcluster/install.py",
        "KUBECONFIG",
    ): "the install points kubectl and helm at the local cluster",
    ("rayquota/localcluster/paths.py", "XDG_CACHE_HOME"): "the XDG base-directory convention for caches",
    ("rayquota/devtools/localhead.py", WHOLE): "dev-only: " + _CHILD,
    ("rayquota/localcluster/kueue_crds.py", WHOLE): _CHILD,
    ("rayquota/localcluster/peers.py", WHOLE): _CHILD,
    ("rayquota/localcluster/gateway_api.py", WHOLE): _CHILD,
    ("rayquota/localcluster/binaries.py", WHOLE): _CHILD,
    ("rayquota/localcluster/multicluster_cli.py", WHOLE): _CHILD,
}
ABOVE_THE_OPERATOR = ("rayquota.dashboard", "rayquota.app", "rayquota.config", "rayquota.cli")


def _modules(
    packages: tuple[str, ...] = ("",), mentioning: tuple[str, ...] = ("",)
) -> list[tuple[str, ast.Module]]:
    """The modules under ``packages`` whose text mentions one of ``mentioning``, parsed."""
    found = []
    for package in packages:
        for path in sorted((PACKAGE / package).rglob("*.py")):
            text = path.read_text()
            if any(word in text for word in mentioning):
                relative = str(path.relative_to(PACKAGE.parent))
                found.append((relative, ast.parse(text, relative)))
    return found


_READERS = ("environ", "getenv")


def _variable(node: ast.Attribute, parents: dict[ast.AST, ast.AST]) -> str:
    """The variable a read names (os.environ.get("X"), os.environ["X"], "X" in os.environ,
    os.getenv("X")), or WHOLE when the environment is used as a whole."""
    parent = parents.get(node)
    call = parents.get(parent) if isinstance(parent, ast.Attribute) and parent.attr == "get" else parent
    if node.attr == "getenv":
        call = parent
    if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Constant):
        return str(call.args[0].value)
    if isinstance(parent, ast.Subscript) and isinstance(parent.slice, ast.Constant):
        return str(parent.slice.value)
    if isinstance(parent, ast.Compare) and isinstance(parent.left, ast.Constant):
        return str(parent.left.value)
    return WHOLE


def _environment_reads(tree: ast.Module) -> list[tuple[int, str]]:
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    reads = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
            reads.append((node.lineno, _variable(node, parents)))
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(alias.name in ("environ", "getenv") for alias in node.names)
        ):
            reads.append((node.lineno, WHOLE))
    return sorted(reads)


def test_no_module_reads_the_environment_on_its_own() -> None:
    readers = {
        f"{name}:{line} {variable}"
        for name, tree in _modules(mentioning=_READERS)
        if not name.startswith(READERS)
        for line, variable in _environment_reads(tree)
        if (name, variable) not in ALLOWED
    }
    assert readers == set()


def test_the_allowed_reads_are_no_rayquota_setting_and_still_happen() -> None:
    assert [variable for _, variable in ALLOWED if variable.startswith("RAYQUOTA_")] == []
    found = {
        (name, variable)
        for name, tree in _modules(mentioning=_READERS)
        for _, variable in _environment_reads(tree)
    }
    assert set(ALLOWED) - found == set()  # an allowance no longer needed is dropped


def test_the_check_finds_a_read() -> None:
    source = (
        "import os\nX = os.environ.get('A')\nY = os.getenv('B')\nZ = os.environ['C']\n"
        "W = 'D' in os.environ\nV = dict(os.environ, E='1')\n"
    )
    assert _environment_reads(ast.parse(source)) == [(2, "A"), (3, "B"), (4, "C"), (5, "D"), (6, WHOLE)]


def test_nothing_under_the_operator_imports_what_sits_above_it() -> None:
    upward = set()
    for name, tree in _modules(("operator",)):
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
