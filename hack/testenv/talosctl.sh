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
set -euo pipefail
source "$(dirname "$0")/lib.sh"

TALOS_VERSION=${TALOS_VERSION:-v1.13.9}
# module pinned by talos's go.mod -> the nearest version the proxy serves
REFUSED=(
  "github.com/siderolabs/go-kubernetes=github.com/siderolabs/go-kubernetes@v0.2.39" # pins v0.2.38
  "go.etcd.io/etcd/etcdutl/v3=go.etcd.io/etcd/etcdutl/v3@v3.6.11"                    # pins v3.6.12
  "github.com/containerd/containerd/v2=github.com/containerd/containerd/v2@v2.2.3"    # talos pins the smira fork
)
out=$TESTENV/talosctl/$TALOS_VERSION
if have talosctl "$out"; then exit 0; fi

start=$SECONDS
src=$TESTENV/src/talosctl-$TALOS_VERSION
log "talosctl $TALOS_VERSION: cold build"
rm -rf "$src" "$out.tmp" && mkdir -p "$src" "$out.tmp"
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
version_pkg=github.com/siderolabs/talos/pkg/machinery/version
with_progress "talosctl $TALOS_VERSION: build" \
  go build -p 2 -trimpath -ldflags "-s -w -X $version_pkg.Tag=$TALOS_VERSION -X $version_pkg.Name=Talos" \
  -o "$out.tmp/talosctl" github.com/siderolabs/talos/cmd/talosctl
"$out.tmp/talosctl" version --client >&2
rm -rf "$out" && mv "$out.tmp" "$out"
have talosctl "$out"
log "talosctl $TALOS_VERSION: cold build took $((SECONDS - start)) s; binary $(du -sh "$out" | cut -f1)"
