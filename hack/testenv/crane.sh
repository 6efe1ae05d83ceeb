#!/usr/bin/env bash
# Build crane (go-containerregistry) from its Go module: the reference client the
# tag lister is benchmarked against (`crane ls`). Versioned folder in the cache,
# linked as $TESTENV/bin/crane; a rerun is a no-op.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CRANE_VERSION=${CRANE_VERSION:-v0.22.1}
dir="$ICHOR_CACHE/go/crane-$CRANE_VERSION"
have crane "$dir" && exit 0

log "crane: building github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION"
mkdir -p "$dir.tmp"
with_progress "crane $CRANE_VERSION" \
  env GOBIN="$dir.tmp" go install -trimpath -ldflags='-s -w' \
  "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION"
rm -rf "$dir" && mv "$dir.tmp" "$dir"
link crane "$dir/crane"
log "crane: $("$dir/crane" version 2>&1 | head -n1)"
