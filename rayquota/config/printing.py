"""`rayquota run --print-config`: the effective configuration, one key a line, each with where
its value came from (default, the file, an environment override, a flag)."""

from __future__ import annotations

import json

from rayquota.config.loader import Loaded, leaf_keys


def render(loaded: Loaded) -> str:
    effective = loaded.configuration.model_dump(mode="json")
    lines = []
    for key, value in leaf_keys(effective).items():
        lines.append(f"{key}: {json.dumps(value)}  # {loaded.source_of(key)}")
    lines.extend(f"# warning: {warning}" for warning in loaded.warnings)
    return "\n".join(lines) + "\n"
