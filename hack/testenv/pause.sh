#!/usr/bin/env bash
# The node's pause (Pod sandbox) binary from tests/harness/pause (no dependencies), into
# $TESTENV/pause/<source sha>/pause, linked from $TESTENV/bin/pause; a rerun with the
# same source is a no-op. The node tests make it a FROM-scratch image and push it to the
# test registry: nothing is pulled.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

src=$(cd "$(dirname "$0")/../../tests/harness/pause" && pwd)
sha=$(cat "$src/main.go" "$src/go.mod" | sha256sum | cut -c1-16)
out=$TESTENV/pause/$sha
if have pause "$out"; then exit 0; fi
start=$SECONDS
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
(cd "$src" && go build -trimpath -ldflags "-s -w" -o "$out.tmp/pause" .)
rm -rf "$out" && mv "$out.tmp" "$out"
have pause "$out"
log "pause: built in $((SECONDS - start)) s"
