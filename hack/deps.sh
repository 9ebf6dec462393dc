#!/usr/bin/env bash
# make deps: installs what the testbed, the tests and `make up` need.
# Idempotent: what is installed or built at the right version is skipped.
#
#   Debian packages: etcd-server, redis-server, ejabberd, erlang-p1-pgsql (its
#                    PostgreSQL driver), postgresql,
#                    containerd, runc, containernetworking-plugins (CNI plugins
#                    in /usr/lib/cni), iptables (the real nodes of the testbed)
#   bin/: kube-apiserver, kube-controller-manager, kube-scheduler,
#         kubelet, kube-proxy, kubectl                           (Kubernetes $K8S_VERSION)
#         karmada-controller-manager, karmada-scheduler,
#         karmada-aggregated-apiserver, karmada-webhook        (Karmada $KARMADA_VERSION)
#         kwok                                                   (KWOK $KWOK_VERSION)
#         versitygw (the S3 server of the ML connector's artifacts) (versitygw $VERSITYGW_VERSION)
#         karmada-crds/ (Karmada's CRDs and webhook configuration)
#         libonnxruntime.so.1  (ONNX Runtime $ORT_VERSION for linux/amd64, from the
#                               npm package onnxruntime-node; the model server's cgo build)
#
# Binaries are built once into a cache outside the checkout
# ($MLSYSOPS_BIN_CACHE, default ~/.cache/mlsysops/bin) and copied into bin/,
# so a fresh clone on the same machine does not build them again.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/bin
CACHE=${MLSYSOPS_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlsysops/bin}
K8S_VERSION=v1.31.3
KARMADA_VERSION=v1.13.0
KWOK_VERSION=v0.7.0
VERSITYGW_VERSION=v1.8.0
# The ONNX Runtime whose C API (ORT_API_VERSION 24) github.com/yalue/onnxruntime_go
# v1.27.0 is written against.
ORT_VERSION=1.24.1
export GOFLAGS=-mod=mod
# The checksum database does not answer for k8s.io/kubernetes.
export GONOSUMDB=${GONOSUMDB:+$GONOSUMDB,}k8s.io/kubernetes

log() { printf '==> %s\n' "$*"; }
die() { printf 'deps: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "Go is not installed (need Go 1.24 or newer)"
mkdir -p "$BIN" "$CACHE"

# --- Debian packages --------------------------------------------------------
pkgs=(etcd-server redis-server ejabberd erlang-p1-pgsql postgresql containerd runc containernetworking-plugins iptables)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  [[ $(id -u) == 0 ]] || die "missing Debian packages ${missing[*]}: run 'make deps' as root, or install them with apt-get"
  log "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "Debian packages present: ${pkgs[*]}"
fi

# --- binaries -----------------------------------------------------------------
# install NAME VERSION BUILD-COMMAND...: copies $CACHE/NAME-VERSION/NAME into
# bin/NAME after building it there with BUILD-COMMAND (run with $OUT set).
install_bin() {
  local name=$1 version=$2; shift 2
  local stamp="$BIN/.$name.version" out="$CACHE/$name-$version"
  if [[ -x $BIN/$name && -f $stamp && $(<"$stamp") == "$version" ]]; then
    log "$name $version: up to date"
    return
  fi
  if [[ ! -x $out/$name ]]; then
    log "$name $version: building (first time only; see the times in README.md)"
    mkdir -p "$out"
    local start=$SECONDS
    OUT=$out "$@"
    log "$name $version: built in $((SECONDS - start))s"
  fi
  cp -f "$out/$name" "$BIN/$name.tmp" && mv -f "$BIN/$name.tmp" "$BIN/$name"
  echo "$version" >"$stamp"
  log "$name $version: installed in bin/"
}

k8s_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=31 -X k8s.io/component-base/version.gitTreeState=clean"
build_k8s() { # $1: component
  (cd "$ROOT/hack/tools/kubernetes" && go build -trimpath -ldflags "$k8s_ldflags" -o "$OUT/$1" "k8s.io/kubernetes/cmd/$1")
}
# kubelet and kube-proxy run the testbed's real nodes (see internal/testbed/realnode.go);
# kubectl is what the chaos soak applies and deletes applications with.
for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
  install_bin "$c" "$K8S_VERSION" build_k8s "$c"
done

karmada_ldflags="-s -w -X github.com/karmada-io/karmada/pkg/version.gitVersion=$KARMADA_VERSION -X github.com/karmada-io/karmada/pkg/version.gitTreeState=clean"
build_karmada() { # $1: cmd directory, $2: binary name
  (cd "$ROOT/hack/tools/karmada" && go build -trimpath -ldflags "$karmada_ldflags" -o "$OUT/$2" "github.com/karmada-io/karmada/cmd/$1")
}
for c in controller-manager scheduler aggregated-apiserver webhook; do
  install_bin "karmada-$c" "$KARMADA_VERSION" build_karmada "$c" "karmada-$c"
done

build_kwok() { GOBIN=$OUT go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"; }
install_bin kwok "$KWOK_VERSION" build_kwok

build_versitygw() { GOBIN=$OUT go install -trimpath -ldflags "-s -w" "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"; }
install_bin versitygw "$VERSITYGW_VERSION" build_versitygw

# --- ONNX Runtime ----------------------------------------------------------------
# Debian has no libonnxruntime; the npm package onnxruntime-node ships the
# shared library for linux/x64 (and arm64) inside its tarball.
fetch_onnxruntime() {
  command -v npm >/dev/null || die "npm is needed to fetch ONNX Runtime: apt-get install npm"
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "onnxruntime-node@$ORT_VERSION" >/dev/null 2>&1) ||
    { rm -rf "$tmp"; die "npm pack onnxruntime-node@$ORT_VERSION failed"; }
  tar -xzf "$tmp/onnxruntime-node-$ORT_VERSION.tgz" -C "$tmp" package/bin/napi-v6/linux/x64/libonnxruntime.so.1
  install -m 0755 "$tmp/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$OUT/libonnxruntime.so.1"
  rm -rf "$tmp"
}
install_bin libonnxruntime.so.1 "$ORT_VERSION" fetch_onnxruntime

# --- Karmada's CRDs and webhook configuration ----------------------------------
crds="$BIN/karmada-crds"
if [[ -f $crds/.version && $(<"$crds/.version") == "$KARMADA_VERSION" ]]; then
  log "karmada CRDs $KARMADA_VERSION: up to date"
else
  src=$(cd "$ROOT/hack/tools/karmada" && go list -m -f '{{.Dir}}' github.com/karmada-io/karmada)
  rm -rf "$crds" && mkdir -p "$crds/bases"
  cp -r "$src/charts/karmada/_crds/bases/." "$crds/bases/"
  cp "$src/artifacts/deploy/webhook-configuration.yaml" "$crds/"
  chmod -R u+w "$crds"
  echo "$KARMADA_VERSION" >"$crds/.version"
  log "karmada CRDs $KARMADA_VERSION: copied to bin/karmada-crds"
fi

log "dependencies ready: $(ls "$BIN" | tr '\n' ' ')"
