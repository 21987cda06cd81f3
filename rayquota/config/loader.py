"""Read the configuration once: the file, then environment overrides, then `rayquota run` flags;
validate it; say where each value came from. Every error names the key (and the variable or flag
that set it); an unknown key is refused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rayquota.config import kueue_keys, overrides
from rayquota.config.model import KUEUE_API_VERSION, Configuration
from rayquota.operator import kuberay_env

DEFAULT = "default"


class ConfigError(ValueError):
    """The configuration is refused; ``str()`` lists every problem, one a line, each naming its key."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Loaded:
    configuration: Configuration
    sources: Mapping[str, str]
    """Where a key's value came from ("file PATH", "env VAR", "flag --x"); a key not named: default."""
    warnings: list[str] = field(default_factory=list)

    def source_of(self, key: str) -> str:
        return self.sources.get(key, DEFAULT)


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError([f"--config {path}: cannot read it ({exc.strerror})"]) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"--config {path}: not YAML ({exc})"]) from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError([f"--config {path}: expected a mapping of keys, got {type(raw).__name__}"])
    for key in ("apiVersion", "kind"):
        if key not in raw:
            raise ConfigError([f"{key}: required in {path}"])
    return raw


def leaf_keys(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted key -> value for each leaf (a mapping value is descended into, a list is a leaf)."""
    leaves: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            leaves.update(leaf_keys(value, f"{dotted}."))
        else:
            leaves[dotted] = value
    return leaves


def _put(tree: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    node = tree
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[last] = value


def _apply_overrides(
    raw: dict[str, Any],
    env: Mapping[str, str],
    flags: Mapping[str, tuple[str, Any]],
    sources: dict[str, str],
) -> None:
    """Environment overrides, then flags (which win). A switched section the file does not have,
    given sub-keys without its `enable`, stays off: that is how the variables always behaved."""
    given: dict[str, tuple[str, Any]] = {}
    for override in overrides.set_variables(env):
        given[override.key] = (f"env {override.variable}", env[override.variable].strip())
    for key, (flag, value) in flags.items():
        given[key] = (f"flag {flag}", value)
    for section in overrides.SWITCHED_SECTIONS:
        touched = any(key.startswith(f"{section}.") for key in given)
        if touched and section not in raw and f"{section}.enable" not in given:
            _put(raw, f"{section}.enable", False)
    for key, (source, value) in given.items():
        _put(raw, key, value)
        sources[key] = source


def _problem(error: Mapping[str, Any], sources: Mapping[str, str]) -> str:
    key = ".".join(str(part) for part in error["loc"] if not str(part).startswith(("function-", "literal[")))
    where = sources.get(key, "")
    if where.startswith("env "):
        return f"{key} ({where.removeprefix('env ')}={error['input']!r}): {error['msg']}"
    got = f"; got {error['input']!r}" if error["type"] != "missing" else ""
    origin = f" (from {where})" if where else ""
    message = "unknown key (refused)" if error["type"] == "extra_forbidden" else error["msg"]
    return f"{key}: {message}{got}{origin}"


def load(
    file: Path | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, tuple[str, Any]] | None = None,
) -> Loaded:
    """``flags``: key -> (the flag's name, its value), for the flags given on the command line."""
    env = env or {}
    raw = _read_file(file) if file is not None else {}
    sources = {key: f"file {file}" for key in leaf_keys(raw)}
    refusals = [message for name, message in overrides.RETIRED.items() if name in env]
    refusals += [f"KubeRay operator setting rayquota does not honour: {r}" for r in kuberay_env.refusals(env)]
    _apply_overrides(raw, env, flags or {}, sources)
    if raw.get("apiVersion") == KUEUE_API_VERSION and "queue.api" not in sources:
        _put(raw, "queue.api", "kueue")
        sources["queue.api"] = f"apiVersion {KUEUE_API_VERSION}"
    try:
        configuration = Configuration.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(refusals + [_problem(e, sources) for e in exc.errors()]) from None
    verdict = kueue_keys.judge(configuration)
    if refusals or verdict.refusals:
        raise ConfigError(refusals + verdict.refusals)
    return Loaded(configuration, sources, [*verdict.warnings, *overrides.misspelt(env)])
