#!/usr/bin/env bash
# Checks the module's dependencies and the standard library for known
# vulnerabilities that the code can reach, with govulncheck (golang.org/x/vuln)
# at a pinned version, built once into bin/ from the Go module proxy.
#
#   bash hack/vulncheck.sh                          # against vuln.go.dev
#   GOVULNDB=file:///srv/govulndb bash hack/vulncheck.sh   # a local copy
#
# govulncheck needs the Go vulnerability database. When the database cannot
# be reached (the project's build machines reach only the module proxy,
# Debian's archive and npm), this says so and exits 2: no result is better
# than a check that passes without checking anything. Not part of `make test`
# for that reason; see docs/security.md.
set -uo pipefail

GOVULNCHECK_VERSION=v1.9.0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="$ROOT/bin"
TOOL="$BIN_DIR/govulncheck-$GOVULNCHECK_VERSION"
DB="${GOVULNDB:-https://vuln.go.dev}"

if [[ ! -x "$TOOL" ]]; then
  echo "building govulncheck $GOVULNCHECK_VERSION into $BIN_DIR" >&2
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  # go install pkg@version builds outside this module: go.mod is left alone.
  if ! GOBIN="$tmp" go install "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION"; then
    echo "vulncheck: could not build govulncheck $GOVULNCHECK_VERSION from the module proxy" >&2
    exit 1
  fi
  mkdir -p "$BIN_DIR"
  mv "$tmp/govulncheck" "$TOOL"
fi

# The database's index, as govulncheck reads it first.
case "$DB" in
  file://*)
    dir="${DB#file://}"
    if [[ ! -f "$dir/index/db.json" && ! -f "$dir/index/db.json.gz" ]]; then
      echo "vulncheck: no Go vulnerability database at $dir (want index/db.json); nothing was checked" >&2
      exit 2
    fi
    ;;
  http://*|https://*)
    if ! err="$(curl -fsS --max-time 20 -o /dev/null "$DB/index/db.json.gz" 2>&1)"; then
      echo "vulncheck: the Go vulnerability database at $DB is unreachable from this machine ($err); nothing was checked." >&2
      echo "vulncheck: run it where $DB is reachable, or point GOVULNDB at a copy (file:///path)." >&2
      exit 2
    fi
    ;;
  *)
    echo "vulncheck: GOVULNDB=$DB: want https://..., http://... or file:///..." >&2
    exit 2
    ;;
esac

cd "$ROOT"
exec "$TOOL" -db "$DB" ./...
