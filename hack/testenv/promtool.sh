#!/usr/bin/env bash
# promtool, for the chart's PrometheusRule tests (`promtool check rules`, `promtool test
# rules`). Built from Prometheus's Go module through the module proxy into
# $TESTENV/promtool/<version>/, linked from $TESTENV/bin/promtool; a rerun is a no-op.
# Prometheus tags its Go module v0.<major><minor>.<patch> (v0.316.0 is Prometheus 3.16.0),
# the newest the proxy serves; `go install` works: the module has no replace or exclude
# directives. `-tags remove_all_sd` leaves out every service discovery plugin (AWS, Azure,
# GCE, Kubernetes, ...), which `check rules` and `test rules` never use: 228 CPU-seconds
# to compile from an empty build cache instead of 510, and a 52 MB binary instead of 84.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

PROMTOOL_VERSION=${PROMTOOL_VERSION:-v0.316.0}
# v0.316.0 -> 3.16.0: what promtool --version should say
module_minor=${PROMTOOL_VERSION#v0.}
module_minor=${module_minor%%.*}
release="$((module_minor / 100)).$((module_minor % 100)).${PROMTOOL_VERSION##*.}"
out=$TESTENV/promtool/$PROMTOOL_VERSION-nosd
if have promtool "$out"; then exit 0; fi

start=$SECONDS
log "promtool $PROMTOOL_VERSION (Prometheus $release): cold build"
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
with_progress "promtool $PROMTOOL_VERSION: build" \
  env GOBIN="$out.tmp" go install -p 2 -trimpath -tags remove_all_sd \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=$release" \
  "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION"
"$out.tmp/promtool" --version >&2
rm -rf "$out" && mv "$out.tmp" "$out"
have promtool "$out"
log "promtool $PROMTOOL_VERSION: cold build took $((SECONDS - start)) s; binary $(du -sh "$out" | cut -f1)"
