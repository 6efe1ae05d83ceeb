#!/usr/bin/env bash
# crane (go-containerregistry), the reference client the tag lister is measured against
# (`crane ls` in `make bench`). Built from its Go module into $TESTENV/crane/<version>/,
# linked from $TESTENV/bin/crane; a rerun is a no-op.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CRANE_VERSION=${CRANE_VERSION:-v0.22.1}
out=$TESTENV/crane/$CRANE_VERSION
if have crane "$out"; then exit 0; fi

start=$SECONDS
log "crane $CRANE_VERSION: cold build"
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
with_progress "crane $CRANE_VERSION: build" \
  env GOBIN="$out.tmp" go install -p 2 -trimpath -ldflags "-s -w" \
  "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION"
"$out.tmp/crane" version >&2
rm -rf "$out" && mv "$out.tmp" "$out"
have crane "$out"
log "crane $CRANE_VERSION: cold build took $((SECONDS - start)) s; binary $(du -sh "$out" | cut -f1)"
