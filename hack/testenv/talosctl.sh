#!/usr/bin/env bash
# talosctl from github.com/siderolabs/talos, for the image whose containers run the
# executor's Talos and Kubernetes steps in the node tests. Built into
# $TESTENV/talosctl/<version>/ and linked from $TESTENV/bin; a rerun is a no-op.
#
# Why a wrapper module: `go install .../cmd/talosctl@v1.13.9` reads the module's version
# list (for deprecation notices), which the module proxy refuses; and talos's go.mod
# replaces modules with forks, which `go install` ignores. So, as for kubernetes, a small
# module in the cache requires talos and its machinery module at the same version and
# carries talos's own replace directives, read from its downloaded go.mod (the
# `./pkg/machinery` one becomes the required version).
#
# Why v1.13.9: the newest release the proxy serves (every v1.14.x is refused). Three
# modules its go.mod pins are refused by the proxy too; their nearest served versions
# build and are used instead (REFUSED below). CGO_ENABLED=0 (lib.sh): a static binary
# for a `FROM scratch` image.
#
# The Talos API stand-in of the node tests (tests/talos_standin, on the machinery API
# types) is built in the same wrapper module, so it compiles against the very modules
# talosctl does and reuses talosctl's build cache: only its own package is compiled. It
# lands in $TESTENV/talos-standin/<stamp>/, the stamp a hash of the Talos version and its
# sources (`bash hack/testenv/talosctl.sh stamp`; tests/harness/talos_standin.py computes
# the same), so changed sources build a new one and the tests never run an old one.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
SOURCES=$(cd "$(dirname "$0")/../.." && pwd)/tests/talos_standin

TALOS_VERSION=${TALOS_VERSION:-v1.13.9}
# module pinned by talos's go.mod -> the nearest version the proxy serves
REFUSED=(
  "github.com/siderolabs/go-kubernetes=github.com/siderolabs/go-kubernetes@v0.2.39" # pins v0.2.38
  "go.etcd.io/etcd/etcdutl/v3=go.etcd.io/etcd/etcdutl/v3@v3.6.11"                    # pins v3.6.12
  "github.com/containerd/containerd/v2=github.com/containerd/containerd/v2@v2.2.3"    # talos pins the smira fork
)
standin_stamp() {
  {
    printf 'talos %s\n' "$TALOS_VERSION"
    (cd "$SOURCES" && find . -type f | sed 's|^\./||' | LC_ALL=C sort | xargs -d '\n' sha256sum)
  } | sha256sum | cut -c1-16
}
if [[ ${1:-} == stamp ]]; then standin_stamp; exit 0; fi

out=$TESTENV/talosctl/$TALOS_VERSION
src=$TESTENV/src/talosctl-$TALOS_VERSION
standin_out=$TESTENV/talos-standin/$(standin_stamp)

# The wrapper module (go.mod and go.sum), made once and kept for the stand-in's builds.
wrapper_module() {
  [[ -f $src/go.mod && -f $src/go.sum ]] && return 0
  rm -rf "$src" && mkdir -p "$src"
  (
    cd "$src"
    go mod init ichor.dev/testenv/talosctl >/dev/null 2>&1
    gomod=$(go mod download -json "github.com/siderolabs/talos@$TALOS_VERSION" | jq -r '.GoMod')
    [[ -f $gomod ]] || { log "no go.mod downloaded for github.com/siderolabs/talos@$TALOS_VERSION"; exit 1; }
    mapfile -t replaces < <(go mod edit -json "$gomod" | jq -r '
      .Replace[]? | select(.New.Version != null)
      | "-replace=\(.Old.Path)=\(.New.Path)@\(.New.Version)"')
    ((${#replaces[@]} > 0)) || { log "no replace directives in talos $TALOS_VERSION go.mod"; exit 1; }
    for replace in "${REFUSED[@]}"; do replaces+=("-replace=$replace"); done
    log "talosctl $TALOS_VERSION: ${#replaces[@]} replace directives (${#REFUSED[@]} for versions the proxy refuses)"
    go mod edit "-go=$(go mod edit -json "$gomod" | jq -r .Go)" \
      "-require=github.com/siderolabs/talos@$TALOS_VERSION" \
      "-require=github.com/siderolabs/talos/pkg/machinery@$TALOS_VERSION" \
      "${replaces[@]}" -tool=github.com/siderolabs/talos/cmd/talosctl
    with_progress "talosctl $TALOS_VERSION: resolve modules" go mod tidy
  ) || { rm -rf "$src"; return 1; }
}

if ! have talosctl "$out"; then
  start=$SECONDS
  log "talosctl $TALOS_VERSION: cold build"
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  wrapper_module
  version_pkg=github.com/siderolabs/talos/pkg/machinery/version
  (cd "$src" && with_progress "talosctl $TALOS_VERSION: build" \
    go build -p 2 -trimpath -ldflags "-s -w -X $version_pkg.Tag=$TALOS_VERSION -X $version_pkg.Name=Talos" \
    -o "$out.tmp/talosctl" github.com/siderolabs/talos/cmd/talosctl)
  "$out.tmp/talosctl" version --client >&2
  rm -rf "$out" && mv "$out.tmp" "$out"
  have talosctl "$out"
  log "talosctl $TALOS_VERSION: cold build took $((SECONDS - start)) s; binary $(du -sh "$out" | cut -f1)"
fi

if ! have talos-standin "$standin_out"; then
  start=$SECONDS
  wrapper_module
  rm -rf "$src/talos-standin" "$standin_out.tmp" && mkdir -p "$src/talos-standin" "$standin_out.tmp"
  cp "$SOURCES"/*.go "$src/talos-standin/"
  # -v lists the packages compiled: on talosctl's build cache, only the stand-in's own
  build_standin() {
    cd "$src" && go build -v -p 2 -trimpath -ldflags "-s -w" \
      -o "$standin_out.tmp/talos-standin" ./talos-standin 2>"$standin_out.tmp/build.log"
  }
  with_progress "talos-standin: build" build_standin \
    || { cat "$standin_out.tmp/build.log" >&2; log "talos-standin: build failed"; exit 1; }
  rm -rf "$standin_out" && mv "$standin_out.tmp" "$standin_out"
  have talos-standin "$standin_out"
  log "talos-standin: built in $((SECONDS - start)) s, $(grep -c . "$standin_out/build.log" || true) packages compiled; binary $(du -sh "$standin_out/talos-standin" | cut -f1)"
fi
