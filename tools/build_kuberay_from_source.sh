#!/bin/sh
# Build KubeRay's operator from a fetched source snapshot (never run by `make test`).
#
#   tools/build_kuberay_from_source.sh [TAG] [MIRROR]
#
# TAG defaults to v1.7.0; MIRROR to the bare git snapshot /work/.mirror/ray-project+kuberay/repo.
# The Go module proxy refuses v1.7.0's module zip (403), so the tag's ray-operator/ tree is taken
# from the snapshot and built with the proxy's dependencies (its go.mod/go.sum pin them). The
# binary lands in ~/.cache/rayquota/bin/kuberay-operator-$TAG/kuberay-operator, beside the CRDs
# of the same tag (config/crd/bases).
set -eu
TAG=${1:-v1.7.0}
MIRROR=${2:-/work/.mirror/ray-project+kuberay/repo}
OUT="$HOME/.cache/rayquota/bin/kuberay-operator-$TAG"
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
git -C "$MIRROR" archive "$TAG" ray-operator | tar -x -C "$SRC"
mkdir -p "$OUT"
(cd "$SRC/ray-operator" && CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" \
    go build -o "$OUT/kuberay-operator" ./main.go)
rm -rf "$OUT/crd" && cp -r "$SRC/ray-operator/config/crd/bases" "$OUT/crd"
echo "$OUT/kuberay-operator"
