"""Every YAML document under samples/, for the tests that check the samples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def sample_documents() -> list[tuple[str, dict[str, Any]]]:
    """(file#index, document) for each Kubernetes manifest, in a stable order (a nodes file for
    the local control plane is not one)."""
    docs = []
    for path in sorted(SAMPLES.rglob("*.yaml")):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if isinstance(doc, dict) and "kind" in doc:
                docs.append((f"{path.relative_to(SAMPLES)}#{index}", doc))
    return docs
