#!/usr/bin/env bash
# etcd from the Go module go.etcd.io/etcd/server/v3 (its root is `package main`),
# built into $TESTENV/etcd/<version>/ and linked from $TESTENV/bin.
#
# It gets its own wrapper module in the cache: k8s.io/kubernetes requires other
# versions of etcd's dependencies, and one module per tool keeps each graph as its
# upstream tested it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
out=$TESTENV/etcd/$ETCD_VERSION
if have etcd "$out"; then exit 0; fi

start=$SECONDS
src=$TESTENV/src/etcd-$ETCD_VERSION
log "etcd $ETCD_VERSION: cold build"
rm -rf "$src" "$out.tmp" && mkdir -p "$src" "$out.tmp"
cd "$src"
go mod init ichor.dev/testenv/etcd >/dev/null 2>&1
go mod edit "-require=go.etcd.io/etcd/server/v3@$ETCD_VERSION" -tool=go.etcd.io/etcd/server/v3
with_progress "etcd $ETCD_VERSION: resolve modules" go mod tidy
with_progress "etcd $ETCD_VERSION: build" \
  go build -p 2 -trimpath -ldflags "-s -w" -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3
"$out.tmp/etcd" --version >&2
rm -rf "$out" && mv "$out.tmp" "$out"
have etcd "$out"
log "etcd $ETCD_VERSION: cold build took $((SECONDS - start)) s; binary $(du -sh "$out" | cut -f1)"
