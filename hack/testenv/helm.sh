#!/usr/bin/env bash
# helm from the Go module helm.sh/helm/v4 (no replace directives, so `go install`
# works), built into $TESTENV/helm/<version>/ and linked from $TESTENV/bin.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

HELM_VERSION=${HELM_VERSION:-v4.3.2}
out=$TESTENV/helm/$HELM_VERSION
if have helm "$out"; then exit 0; fi

start=$SECONDS
log "helm $HELM_VERSION: cold build"
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
# `helm version` reads this variable; without it a go-installed helm reports a placeholder.
GOBIN=$out.tmp with_progress "helm $HELM_VERSION: build" \
  go install -p 2 -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
  "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
"$out.tmp/helm" version >&2
rm -rf "$out" && mv "$out.tmp" "$out"
have helm "$out"
log "helm $HELM_VERSION: cold build took $((SECONDS - start)) s; binary $(du -sh "$out" | cut -f1)"
