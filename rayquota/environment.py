"""The process environment, read in this one place (it imports nothing of rayquota: the
configuration and the local control plane both read through it).

`rayquota run` and `rayquota dashboard` hand it to the configuration loader, which reads the
documented overrides of named keys (config/overrides.py). The few `RAYQUOTA_*` variables that are
no operator setting (the local control plane's folders and node file, for `rayquota cluster`) are
named in `TOOL_VARIABLES` and read through `tool_variable`, which refuses any other name. Other
modules read no `RAYQUOTA_*` variable: tests/unit/config/test_one_reader.py checks it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

TOOL_VARIABLES: Mapping[str, str] = {
    "RAYQUOTA_CACHE_DIR": "where the local control plane's binaries are cached "
    "(default: $XDG_CACHE_HOME/rayquota or ~/.cache/rayquota)",
    "RAYQUOTA_STATE_DIR": "where each local cluster keeps its state (default: the cache folder's clusters/)",
    "RAYQUOTA_NODES_FILE": "the simulated nodes of `rayquota cluster up` and `rayquota multicluster up` "
    "(a YAML file)",
    "RAYQUOTA_BUILD_NICE": "the niceness of peer builds (`rayquota peers build`; default 19): lower it when "
    "a build at 19 would never finish on a loaded machine",
}


def process() -> Mapping[str, str]:
    """The process's environment, for the configuration loader."""
    return os.environ


def tool_variable(name: str) -> str | None:
    """A variable of `TOOL_VARIABLES` (None when unset or empty); any other name is a programming error."""
    if name not in TOOL_VARIABLES:
        raise KeyError(f"{name} is not one of rayquota's tool variables ({', '.join(TOOL_VARIABLES)})")
    return os.environ.get(name) or None
