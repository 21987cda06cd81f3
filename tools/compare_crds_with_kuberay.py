"""The generated ray.io CRDs against the CRDs in DIR (e.g. a hand-built KubeRay v1.7.0's), with the
same comparison and allow-list as tests/unit/api/test_crds_against_kuberay.py (which `make test`
runs against v1.6.2). Prints the count of differences and each one the allow-list leaves
unexplained.

    .venv/bin/python tools/compare_crds_with_kuberay.py ~/.cache/rayquota/bin/kuberay-operator-v1.7.0/crd
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rayquota.api.crd_compare import allowed, differences, schema_of
from rayquota.api.crdgen import crd_for
from rayquota.api.ray_v1 import RAY_KINDS
from rayquota.api.raycronjob_v1 import RayCronJob
from tests.unit.api.test_crds_against_kuberay import allow_list


def main(crd_dir: Path) -> int:
    theirs = {}
    for path in sorted(crd_dir.glob("ray.io_*.yaml")):
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        crd = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
        theirs[crd["spec"]["names"]["kind"]] = crd
    entries = allow_list()
    total, unexplained = 0, []
    for kind in (*RAY_KINDS, RayCronJob):
        found = list(differences(schema_of(crd_for(kind)), schema_of(theirs[kind.crd.kind])))
        total += len(found)
        unexplained += [f"{kind.crd.kind} {d}" for d in found if allowed(d, entries) is None]
    print(f"{total} differences, {len(unexplained)} not explained by the allow-list")
    for line in unexplained:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).expanduser()))
