#!/usr/bin/env bash
# Fails (exit 1) when the generated deepcopy functions or CRDs differ from
# what hack/generate.sh produces from the current API types. The check runs
# in a temporary copy; the checkout is never modified.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/internal"
cp "$ROOT/go.mod" "$ROOT/go.sum" "$tmp/"
cp -R "$ROOT/internal/api" "$tmp/internal/api"
mkdir -p "$tmp/crds"
cp -R "$ROOT/crds/." "$tmp/crds/"
chartcrds=deployments/charts/mlsysops-karmada/files/crds
mkdir -p "$tmp/$chartcrds"
cp -R "$ROOT/$chartcrds/." "$tmp/$chartcrds/"

GEN_ROOT="$tmp" bash "$ROOT/hack/generate.sh"

status=0
if ! diff -ru "$ROOT/internal/api" "$tmp/internal/api"; then
  status=1
fi
if ! diff -ru "$ROOT/crds" "$tmp/crds"; then
  status=1
fi
if ! diff -ru "$ROOT/$chartcrds" "$tmp/$chartcrds"; then
  status=1
fi
if [[ $status -ne 0 ]]; then
  echo >&2
  echo "generated files are out of date: run 'make generate' (bash hack/generate.sh) and commit the result" >&2
fi
exit $status
