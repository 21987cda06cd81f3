"""requirements.lock covers what pyproject.toml asks for, so `make` installs a complete, pinned set."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def _locked() -> dict[str, tuple[str, str]]:
    """Canonical name -> (version, the pin's full text including its hash lines)."""
    pins: dict[str, tuple[str, str]] = {}
    blocks = re.split(r"\n(?=\S)", (REPO / "requirements.lock").read_text())
    for block in blocks:
        match = PIN.match(block)
        if match:
            pins[canonicalize_name(match.group(1))] = (match.group(2), block)
    return pins


def _declared() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    return [Requirement(text) for text in declared]


def test_every_declared_dependency_is_pinned_within_its_range() -> None:
    locked = _locked()
    for requirement in _declared():
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{requirement} is missing from requirements.lock: run `make lock`"
        version = locked[name][0]
        assert requirement.specifier.contains(version, prereleases=True), (
            f"requirements.lock pins {name}=={version}, outside {requirement}: run `make lock`"
        )


def test_every_pin_carries_hashes() -> None:
    # pip's hash-checking mode (which `make` relies on) rejects the whole file if one pin has none.
    unhashed = [name for name, (_, block) in _locked().items() if "--hash=sha256:" not in block]
    assert unhashed == []


def test_extras_of_ray_are_locked() -> None:
    # ray[default,serve] pulls in the dashboard and Serve; their dependencies must be pinned as well.
    locked = _locked()
    assert {"aiohttp-cors", "fastapi", "uvicorn", "starlette"} <= set(locked)
