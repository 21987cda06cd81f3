"""List every spec field of KubeRay's RayCluster, RayJob, RayService and RayCronJob types, one a line.

Reads the Go types of a KubeRay checkout (`ray-operator/apis/ray/v1/*_types.go`) at a tag and
walks the spec structs from RayClusterSpec, RayJobSpec, RayServiceSpec and RayCronJobSpec,
descending only into KubeRay's own structs (Kubernetes types such as a pod template are one
field). The output is the checked-in list tests/unit/api/kuberay_v1_7_0_spec_fields.txt, which the
field-walk test compares with our models:

    python tools/kuberay_spec_fields.py /path/to/kuberay v1.7.0 \
        > tests/unit/api/kuberay_v1_7_0_spec_fields.txt
"""

from __future__ import annotations

import re
import subprocess
import sys

TYPES = ("raycluster_types.go", "rayjob_types.go", "rayservice_types.go", "raycronjob_types.go")
ROOTS = {
    "RayCluster": "RayClusterSpec",
    "RayJob": "RayJobSpec",
    "RayService": "RayServiceSpec",
    "RayCronJob": "RayCronJobSpec",
}
_STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.M | re.S)
_FIELD = re.compile(r"^\s*(\w+)?\s+([\w.\[\]*]+)\s+`json:\"([^\"]*)\"", re.M)
_EMBEDDED = re.compile(r"^\s*([\w.*]+)\s+`json:\"([^\"]*)\"", re.M)


def structs(source: str) -> dict[str, list[tuple[str, str]]]:
    """Struct name -> [(json name, Go element type)]; an inline embedded struct has name ''."""
    found: dict[str, list[tuple[str, str]]] = {}
    for name, body in _STRUCT.findall(source):
        fields: list[tuple[str, str]] = []
        for line in body.splitlines():
            if line.strip().startswith("//"):
                continue
            match = _FIELD.match(line) or None
            if match and match.group(1):
                tag, gotype = match.group(3).split(",")[0], match.group(2)
            else:
                embedded = _EMBEDDED.match(line)
                if not embedded:
                    continue
                tag, gotype = "", embedded.group(1)
            if tag == "-":
                continue
            fields.append((tag, re.sub(r"^(\[\]|\*|map\[string\])+", "", gotype)))
        found[name] = fields
    return found


def walk(types: dict[str, list[tuple[str, str]]], struct: str, prefix: str) -> list[str]:
    paths: list[str] = []
    for tag, gotype in types[struct]:
        path = f"{prefix}.{tag}" if tag else prefix
        if tag:
            paths.append(path)
        if gotype in types:
            paths += walk(types, gotype, path)
    return paths


def main(repo: str, tag: str) -> None:
    source = "\n".join(
        subprocess.run(
            ["git", "-C", repo, "show", f"{tag}:ray-operator/apis/ray/v1/{name}"],
            check=True, capture_output=True, text=True,
        ).stdout
        for name in TYPES
    )  # fmt: skip
    types = structs(source)
    print(f"# KubeRay {tag}: every spec field of its {', '.join(ROOTS)} types")
    print("# (tools/kuberay_spec_fields.py; Kubernetes types such as pod templates are one field)")
    for kind, root in ROOTS.items():
        for path in walk(types, root, "spec"):
            print(f"{kind} {path}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
