"""Every YAML document under samples/, for the tests that check the samples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def sample_documents() -> list[tuple[str, dict[str, Any]]]:
    """(file#index, document) for each non-empty document, in a stable order."""
    docs = []
    for path in sorted(SAMPLES.rglob("*.yaml")):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc:
                docs.append((f"{path.relative_to(SAMPLES)}#{index}", doc))
    return docs
