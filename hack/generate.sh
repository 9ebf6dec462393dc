#!/usr/bin/env bash
# Generates the deepcopy functions of the API types and the
# CustomResourceDefinitions in crds/ from internal/api with controller-gen,
# pinned to CONTROLLER_TOOLS_VERSION (installed once into bin/).
#
#   bash hack/generate.sh            # regenerate in this checkout
#   GEN_ROOT=/some/copy bash hack/generate.sh   # regenerate in a copy
#
# hack/verify-generated.sh uses GEN_ROOT to check that the committed files
# are up to date without touching the checkout.
set -euo pipefail

CONTROLLER_TOOLS_VERSION=v0.16.5

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GEN_ROOT="${GEN_ROOT:-$ROOT}"
BIN_DIR="$ROOT/bin"
CONTROLLER_GEN="$BIN_DIR/controller-gen-$CONTROLLER_TOOLS_VERSION"

if [[ ! -x "$CONTROLLER_GEN" ]]; then
  echo "installing controller-gen $CONTROLLER_TOOLS_VERSION into $BIN_DIR" >&2
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  # go install pkg@version builds outside this module, so the product's
  # go.mod is left alone.
  GOBIN="$tmp" go install "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION"
  mkdir -p "$BIN_DIR"
  mv "$tmp/controller-gen" "$CONTROLLER_GEN"
fi

cd "$GEN_ROOT"

# Deepcopy: internal/api/v1/zz_generated.deepcopy.go.
"$CONTROLLER_GEN" object paths=./internal/api/...

# CRDs. Floats are allowed because the upstream schema has real-valued
# fields (QoS targets, coordinates, sensor ranges); stale files are removed
# first so that a renamed kind leaves nothing behind.
mkdir -p crds
rm -f crds/*.yaml
"$CONTROLLER_GEN" crd:allowDangerousTypes=true,crdVersions=v1 paths=./internal/api/... output:crd:artifacts:config=crds

# The Karmada chart carries a copy of the CRDs (Helm charts are
# self-contained): deployments/charts/mlsysops-karmada/files/crds.
mkdir -p deployments/charts/mlsysops-karmada/files/crds
rm -f deployments/charts/mlsysops-karmada/files/crds/*.yaml
cp crds/*.yaml deployments/charts/mlsysops-karmada/files/crds/
