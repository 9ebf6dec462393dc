#!/usr/bin/env bash
# Packs the OSV entries of a golang/vulndb checkout (data/osv) into
# third_party/govulndb/osv.tar.gz, the snapshot hack/vulncheck.sh falls back
# to when vuln.go.dev cannot be reached. Reproducible: sorted names, fixed
# owner and time (the checkout's last commit), gzip without a timestamp.
#
#   bash hack/vulndb-snapshot.sh /path/to/vulndb
set -euo pipefail

src="${1:?usage: $0 /path/to/golang/vulndb checkout}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ ! -d "$src/data/osv" ]]; then
  echo "vulndb-snapshot: $src/data/osv: no such directory (want a golang/vulndb checkout)" >&2
  exit 1
fi
commit="$(git -C "$src" log -1 --format=%H)"
when="$(git -C "$src" log -1 --format=%cI)"
out="$ROOT/third_party/govulndb/osv.tar.gz"
tar -C "$src/data" --sort=name --mtime="$when" --owner=0 --group=0 --numeric-owner -cf - osv | gzip -n -9 >"$out.tmp"
mv "$out.tmp" "$out"
cp "$src/data/LICENSE" "$ROOT/third_party/govulndb/LICENSE"
count="$(tar -tzf "$out" | grep -c '\.json$')"
printf 'golang/vulndb %s %s %s entries\n' "$commit" "$when" "$count" >"$ROOT/third_party/govulndb/VERSION"
echo "vulndb-snapshot: $count entries of golang/vulndb $commit ($when) in $out; update third_party/govulndb/README.md"
