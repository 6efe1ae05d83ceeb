#!/usr/bin/env bash
# The CNCF distribution registry v3, for the release check's component tests: it pages
# tag lists with `Link` and sorts them (Debian's 2.8.2 does neither). Built from its Go
# module through the module proxy into $TESTENV/registry/<version>/, linked from
# $TESTENV/bin/registry; a rerun is a no-op. `go install pkg@version` works here: the
# module has no replace directives.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

REGISTRY_VERSION=${REGISTRY_VERSION:-v3.1.2}
out=$TESTENV/registry/$REGISTRY_VERSION
if have registry "$out"; then exit 0; fi

start=$SECONDS
log "registry $REGISTRY_VERSION: cold build"
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
with_progress "registry $REGISTRY_VERSION: build" \
  env GOBIN="$out.tmp" go install -p 2 -trimpath -ldflags "-s -w" \
  "github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION"
"$out.tmp/registry" --version >&2
rm -rf "$out" && mv "$out.tmp" "$out"
have registry "$out"
log "registry $REGISTRY_VERSION: cold build took $((SECONDS - start)) s; binary $(du -sh "$out" | cut -f1)"
