#!/usr/bin/env bash
# Checks the module's dependencies and the standard library for known
# vulnerabilities that the code can reach, with govulncheck (golang.org/x/vuln)
# at a pinned version, built once into bin/ from the Go module proxy. Part of
# `make test`.
#
#   bash hack/vulncheck.sh                                 # vuln.go.dev, else the snapshot
#   GOVULNDB=file:///srv/govulndb bash hack/vulncheck.sh   # a copy of the database
#
# The database: GOVULNDB when set; otherwise https://vuln.go.dev when it
# answers; otherwise the snapshot committed in third_party/govulndb (the
# project's build machines reach only the module proxy, Debian's archive and
# npm), whose date the output gives. Every vulnerability the code calls must
# be fixed or accepted with its reason in hack/vulncheck-accepted.yaml
# (cmd/vulnreport decides); the check fails otherwise.
set -uo pipefail

GOVULNCHECK_VERSION=v1.9.0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="$ROOT/bin"
TOOL="$BIN_DIR/govulncheck-$GOVULNCHECK_VERSION"
SNAPSHOT="$ROOT/third_party/govulndb/osv.tar.gz"

if [[ ! -x "$TOOL" ]]; then
  echo "vulncheck: building govulncheck $GOVULNCHECK_VERSION into $BIN_DIR" >&2
  tmp="$(mktemp -d)"
  # go install pkg@version builds outside this module: go.mod is left alone.
  if ! GOBIN="$tmp" go install "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION"; then
    echo "vulncheck: could not build govulncheck $GOVULNCHECK_VERSION from the module proxy" >&2
    rm -rf "$tmp"
    exit 1
  fi
  mkdir -p "$BIN_DIR"
  mv "$tmp/govulncheck" "$TOOL"
  rm -rf "$tmp"
fi

# unpack_snapshot extracts the committed snapshot once per content, into
# bin/, and prints its directory (a flat directory of <ID>.json entries,
# which govulncheck indexes itself).
unpack_snapshot() {
  local sum dir
  sum="$(sha256sum "$SNAPSHOT" | cut -c1-16)"
  dir="$BIN_DIR/govulndb-$sum"
  if [[ ! -d "$dir/osv" ]]; then
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp" && tar -xzf "$SNAPSHOT" -C "$dir.tmp" && mv "$dir.tmp" "$dir" || return 1
  fi
  echo "$dir/osv"
}

DB="${GOVULNDB:-}"
if [[ -z "$DB" ]]; then
  if curl -fsS --max-time 10 -o /dev/null https://vuln.go.dev/index/db.json.gz 2>/dev/null; then
    DB=https://vuln.go.dev
  else
    dir="$(unpack_snapshot)" || { echo "vulncheck: cannot unpack $SNAPSHOT" >&2; exit 1; }
    DB="file://$dir"
    echo "vulncheck: vuln.go.dev is unreachable from this machine; using the snapshot in third_party/govulndb ($(cat "$ROOT/third_party/govulndb/VERSION"))"
  fi
fi
case "$DB" in
  file://*)
    dir="${DB#file://}"
    if [[ ! -f "$dir/index/modules.json" ]] && ! compgen -G "$dir/GO-*.json" >/dev/null; then
      echo "vulncheck: no Go vulnerability database at $dir (want index/modules.json or GO-*.json entries); nothing was checked" >&2
      exit 2
    fi
    ;;
  http://*|https://*) ;;
  *)
    echo "vulncheck: GOVULNDB=$DB: want https://..., http://... or file:///..." >&2
    exit 2
    ;;
esac

cd "$ROOT"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
# govulncheck -format json exits 0 with findings; its errors (a package
# that does not load, an unreadable database) exit non-zero.
if ! "$TOOL" -db "$DB" -format json ./... >"$out"; then
  echo "vulncheck: govulncheck failed against $DB" >&2
  exit 1
fi
go run ./cmd/vulnreport --accepted hack/vulncheck-accepted.yaml <"$out"
