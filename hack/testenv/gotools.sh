#!/usr/bin/env bash
# The test-only Go programs of tests/gotools, built from one wrapper module:
#   kstatus    sigs.k8s.io/cli-utils' kstatus over objects from the API server or stdin
#   gowebhook  a TalosCluster admission webhook on sigs.k8s.io/controller-runtime
# Built into $TESTENV/gotools/<stamp>/ (the stamp hashes the module's sources and the Go
# version, as tests/support/gotools.py computes it) and linked from $TESTENV/bin.
# A rerun with unchanged sources is a no-op.
#
# Why one module pinned to kube.sh's versions: every module these programs share with
# the kubernetes build (k8s.io/* v0.37.2 with kubernetes v1.37.2, client-go's and
# apimachinery's dependencies) is required at exactly the version that build resolved,
# and the flags are the same (-trimpath, CGO_ENABLED=0 from lib.sh, GOFLAGS from the
# environment), so Go's build cache already holds those packages: only controller-runtime,
# cli-utils' kstatus and the two programs compile. The check below prints any shared
# module at another version (its packages would compile anew).
#
# Versions: controller-runtime v0.25.3 (the newest served, built on k8s.io v0.37.0, so
# v0.37.2 is a patch above). cli-utils v0.37.2 is the newest the module proxy serves
# (2024, written for k8s.io v0.30); the proxy refuses anything newer (a branch query:
# 403 "This module version is not available"). Its pkg/kstatus/status imports only
# apimachinery's unstructured objects and core/v1 names, and builds against v0.37.2.
#
#   hack/testenv/gotools.sh           build or reuse
#   hack/testenv/gotools.sh pin       rewrite tests/gotools/go.mod from kube.sh's resolved
#                                     go.mod (after a KUBE_VERSION move; needs kube.sh run)
#   hack/testenv/gotools.sh measure   the build in an empty GOCACHE (cold), beside the
#                                     incremental figure of the first build on this cache
#   hack/testenv/gotools.sh stamp     print the stamp of the sources (a test compares it)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SRC=$ROOT/tests/gotools
PROGRAMS=(kstatus gowebhook)
KUBE_VERSION=${KUBE_VERSION:-$(sed -n 's/^KUBE_VERSION=\${KUBE_VERSION:-\(v[^}]*\)}$/\1/p' "$HERE/kube.sh")}
[[ -n $KUBE_VERSION ]] || { log "gotools: no KUBE_VERSION default found in $HERE/kube.sh"; exit 1; }
KUBE_GOMOD=$TESTENV/src/kubernetes-$KUBE_VERSION/go.mod

# stamp: sha256 over each source's relative path and bytes (go.mod, go.sum, every .go
# file, in byte order) and the Go version; tests/support/gotools.py computes the same.
stamp() {
  local file
  {
    go env GOVERSION
    (cd "$SRC" && { echo go.mod; echo go.sum; find . -name '*.go' | sed 's#^\./##'; } | LC_ALL=C sort) |
      while read -r file; do printf '%s\n' "$file"; cat "$SRC/$file"; done
  } | sha256sum | cut -c1-16
}

# kube_versions: path@version of every module kube.sh's build resolved (replaces applied).
kube_versions() {
  go mod edit -json "$KUBE_GOMOD" | jq -r '
    (.Replace // [] | map({key: .Old.Path, value: .New.Version}) | from_entries) as $r
    | .Require[] | select(.Path != "k8s.io/kubernetes") | "\(.Path)@\($r[.Path] // .Version)"'
}

# shared_check: the modules providing packages to this build, against kube.sh's versions.
shared_check() {
  if [[ ! -f $KUBE_GOMOD ]]; then
    log "gotools: $KUBE_GOMOD is missing (kube.sh not run?): cannot check the shared versions"
    return 0
  fi
  local report
  report=$(awk -F@ '
      NR == FNR { kube[$1] = $2; next }
      $1 in kube { shared++; if (kube[$1] != $2) { other++; list = list " " $1 "@" $2 " (kube: " kube[$1] ")" } }
      END { printf "%d %d%s", shared, other, list }' \
    <(kube_versions) \
    <(cd "$SRC" && go list -deps -f '{{with .Module}}{{.Path}}@{{.Version}}{{end}}' ./... | LC_ALL=C sort -u))
  read -r shared other list <<<"$report"
  if ((other == 0)); then
    log "gotools: $shared modules shared with kubernetes $KUBE_VERSION's build, all at its versions"
  else
    log "gotools: $other of $shared shared modules at other versions than kubernetes $KUBE_VERSION's" \
      "build (their packages compile anew; run \`$0 pin\`):$list"
  fi
}

# build OUT LOG: both programs in one `go build`; LOG gets the packages compiled (-v).
build() {
  local out=$1 compiled=$2
  (cd "$SRC" && go build -v -p 2 -trimpath -ldflags "-s -w" -o "$out/" "${PROGRAMS[@]/#/./}") 2>"$compiled.err" || {
    cat "$compiled.err" >&2
    return 1
  }
  mv "$compiled.err" "$compiled"
}

case ${1:-build} in
stamp)
  stamp
  exit 0
  ;;
pin)
  [[ -f $KUBE_GOMOD ]] || { log "gotools: $KUBE_GOMOD is missing: run \`make testenv\` (kube.sh) first"; exit 1; }
  mapfile -t pins < <(kube_versions | sed 's/^/-require=/')
  cd "$SRC"
  go mod edit "${pins[@]}"
  go mod tidy
  log "gotools: tests/gotools/go.mod pinned to kubernetes $KUBE_VERSION's modules"
  shared_check
  exit 0
  ;;
measure)
  scratch=$(mktemp -d)
  trap 'chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
  first=$(cat "$TESTENV"/gotools/*/figures 2>/dev/null | tail -n1 || true)
  log "gotools: cold build (GOCACHE empty: every package, the k8s.io ones too)"
  start=$SECONDS
  GOCACHE=$scratch/cache build "$scratch/out" "$scratch/compiled"
  cold=$((SECONDS - start))
  log "gotools: cold build ${cold} s, $(wc -l <"$scratch/compiled") packages compiled"
  log "gotools: incremental build on top of kube.sh's cache: ${first:-not recorded (build once first)}"
  exit 0
  ;;
build) ;;
*)
  log "gotools: unknown mode ${1}: build (default), pin, measure or stamp"
  exit 1
  ;;
esac

out=$TESTENV/gotools/$(stamp)
reuse() {
  local program
  for program in "${PROGRAMS[@]}"; do [[ -x $out/$program ]] || return 1; done
  for program in "${PROGRAMS[@]}"; do have "$program" "$out"; done
}
if reuse; then exit 0; fi

start=$SECONDS
shared_check
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
with_progress "gotools (${PROGRAMS[*]})" build "$out.tmp" "$out.tmp/compiled"
seconds=$((SECONDS - start))
packages=$(wc -l <"$out.tmp/compiled")
printf '%s s, %s packages compiled (the rest from the build cache), built %s\n' \
  "$seconds" "$packages" "$(date -u +%FT%TZ)" >"$out.tmp/figures"
rm -rf "$out" && mv "$out.tmp" "$out"
reuse
log "gotools: built in ${seconds} s; ${packages} packages compiled, the rest reused from the" \
  "build cache; binaries $(du -sh "$out" | cut -f1) in $out"
