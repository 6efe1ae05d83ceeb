#!/usr/bin/env bash
# containerd 2.x, ctr and the runc shim, built from the Go module
# github.com/containerd/containerd/v2 (its go.mod has no replace directives, so
# `go install` works) into $TESTENV/containerd/<version>/ and linked from $TESTENV/bin.
# Not Debian's containerd 1.6: kubelet 1.37 needs the RuntimeConfig call that only 2.x
# implements. The shim is built with `no_grpc` (it speaks ttrpc only) and must sit on
# containerd's PATH: the node harness puts this folder first.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
out=$TESTENV/containerd/$CONTAINERD_VERSION
module=github.com/containerd/containerd/v2
if have containerd "$out" && have ctr "$out" && have containerd-shim-runc-v2 "$out"; then exit 0; fi

start=$SECONDS
log "containerd $CONTAINERD_VERSION: cold build"
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
ldflags="-s -w -X $module/version.Version=$CONTAINERD_VERSION"
with_progress "containerd $CONTAINERD_VERSION: build containerd + ctr" \
  env GOBIN="$out.tmp" go install -p 2 -trimpath -tags urfave_cli_no_docs -ldflags "$ldflags" \
  "$module/cmd/containerd@$CONTAINERD_VERSION" "$module/cmd/ctr@$CONTAINERD_VERSION"
with_progress "containerd $CONTAINERD_VERSION: build the runc shim" \
  env GOBIN="$out.tmp" go install -p 2 -trimpath -tags "urfave_cli_no_docs no_grpc" -ldflags "$ldflags" \
  "$module/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
"$out.tmp/containerd" --version >&2
rm -rf "$out" && mv "$out.tmp" "$out"
have containerd "$out" && have ctr "$out" && have containerd-shim-runc-v2 "$out"
log "containerd $CONTAINERD_VERSION: cold build took $((SECONDS - start)) s; binaries $(du -sh "$out" | cut -f1)"
