#!/usr/bin/env bash
# Build the CNCF distribution registry (v3) used by the component tests of the
# release check, from its Go module through the module proxy, into a versioned
# folder of the cache; linked as $TESTENV/bin/registry. A rerun is a no-op.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REGISTRY_VERSION=${REGISTRY_VERSION:-v3.1.2}
dir="$ICHOR_CACHE/go/registry-$REGISTRY_VERSION"
have registry "$dir" && exit 0

log "registry: building github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION"
mkdir -p "$dir.tmp"
with_progress "registry $REGISTRY_VERSION" \
  env GOBIN="$dir.tmp" go install -trimpath -ldflags='-s -w' \
  "github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION"
rm -rf "$dir" && mv "$dir.tmp" "$dir"
link registry "$dir/registry"
log "registry: $("$dir/registry" --version 2>&1 | head -n1)"
