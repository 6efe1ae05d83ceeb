#!/usr/bin/env bash
# kube-apiserver and kubectl, and the node's kubelet, kube-controller-manager,
# kube-scheduler and kube-proxy, from the Go module k8s.io/kubernetes, built into
# $TESTENV/kubernetes/<version>/ and linked from $TESTENV/bin.
#
# `go install k8s.io/kubernetes/cmd/...@vX` cannot work: the module replaces its
# staging modules (k8s.io/api, client-go, ...) with ./staging directories. So we
# write a small wrapper module in the cache that requires k8s.io/kubernetes and
# replaces every staging module with its published v0.<minor>.<patch>, the list
# read from the downloaded go.mod rather than written down here. All the binaries
# come out of one `go build`, so each one after the apiserver costs little: they share
# most packages (on top of a built apiserver, the four node binaries take minutes).
#
# If KUBE_VERSION does not resolve or build, the newest final of the previous
# served minor is tried; every error is kept in $TESTENV/logs/.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
LOGS=$TESTENV/logs
mkdir -p "$LOGS"

# outdir VERSION: where the binaries of VERSION live.
outdir() { echo "$TESTENV/kubernetes/$1"; }

TOOLS=(kube-apiserver kubectl kubelet kube-controller-manager kube-scheduler kube-proxy)

# reuse VERSION: link the cached binaries of VERSION if all are there.
reuse() {
  local dir tool
  dir=$(outdir "$1")
  for tool in "${TOOLS[@]}"; do [[ -x $dir/$tool ]] || return 1; done
  for tool in "${TOOLS[@]}"; do have "$tool" "$dir" || return 1; done
}

# staging_replaces VERSION: `-replace` arguments for every module the upstream go.mod
# takes from ./staging (or requires at v0.0.0), pinned to v0.<minor>.<patch>.
staging_replaces() {
  local version=$1 gomod minor_patch
  gomod=$(go mod download -json "k8s.io/kubernetes@$version" | jq -r '.GoMod')
  [[ -f $gomod ]] || { log "no go.mod downloaded for k8s.io/kubernetes@$version"; return 1; }
  minor_patch=${version#v1.}
  go mod edit -json "$gomod" | jq -r '
      ([.Replace[]? | select(.New.Path | startswith("./")) | .Old.Path]
       + [.Require[]? | select(.Version == "v0.0.0") | .Path]) | unique[]' |
    while read -r path; do
      printf -- '-replace=%s=%s@v0.%s\n' "$path" "$path" "$minor_patch"
    done
}

# build VERSION: the wrapper module and one `go build` for every binary.
build() {
  local version=$1 src out minor replaces
  src=$TESTENV/src/kubernetes-$version
  out=$(outdir "$version")
  minor=${version#v1.}
  minor=${minor%%.*}
  rm -rf "$src" && mkdir -p "$src" "$out.tmp"
  cd "$src"
  go mod init ichor.dev/testenv/kubernetes >/dev/null 2>&1
  mapfile -t replaces < <(staging_replaces "$version")
  ((${#replaces[@]} > 0)) || { log "no staging modules found in k8s.io/kubernetes@$version go.mod"; return 1; }
  log "kubernetes $version: ${#replaces[@]} staging modules replaced with v0.${version#v1.}"
  local tool tools=() packages=()
  for tool in "${TOOLS[@]}"; do
    tools+=("-tool=k8s.io/kubernetes/cmd/$tool")
    packages+=("k8s.io/kubernetes/cmd/$tool")
  done
  go mod edit "-require=k8s.io/kubernetes@$version" "${replaces[@]}" "${tools[@]}"
  with_progress "kubernetes $version: resolve modules" go mod tidy
  local pkg ldflags=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean"
  done
  with_progress "kubernetes $version: build ${TOOLS[*]}" \
    go build -p 2 -trimpath -ldflags "-s -w$ldflags" -o "$out.tmp/" "${packages[@]}"
  "$out.tmp/kube-apiserver" --version >&2
  "$out.tmp/kubelet" --version >&2
  rm -rf "$out" && mv "$out.tmp" "$out"
}

# previous_minor VERSION: newest final the proxy serves of the minor below VERSION's.
previous_minor() {
  local minor=${1#v1.}
  minor=${minor%%.*}
  go list -m -versions k8s.io/kubernetes | tr ' ' '\n' |
    grep -E "^v1\.$((minor - 1))\.[0-9]+$" | sort -V | tail -1
}

if reuse "$KUBE_VERSION"; then exit 0; fi
# A fallback built earlier (with its recorded failure) is reused too, so a second run
# does not retry a version known not to build.
if [[ -f $LOGS/kubernetes-$KUBE_VERSION.failed ]]; then
  fallback=$(cat "$LOGS/kubernetes-$KUBE_VERSION.failed")
  if reuse "$fallback"; then
    log "kubernetes $KUBE_VERSION did not build (see $LOGS/kubernetes-$KUBE_VERSION.log); using $fallback"
    exit 0
  fi
fi

start=$SECONDS
for version in "$KUBE_VERSION" fallback; do
  if [[ $version == fallback ]]; then
    version=$(previous_minor "$KUBE_VERSION")
    [[ -n $version ]] || { log "no previous minor of $KUBE_VERSION served"; exit 1; }
    log "kubernetes $KUBE_VERSION failed (errors in $LOGS/kubernetes-$KUBE_VERSION.log); trying $version"
  fi
  log "kubernetes $version: cold build (takes many minutes on 2 cores)"
  # In the background, not as an `if` condition, so that `set -e` holds inside it.
  (build "$version") 2> >(tee "$LOGS/kubernetes-$version.log" >&2) &
  if wait $!; then
    [[ $version == "$KUBE_VERSION" ]] || echo "$version" >"$LOGS/kubernetes-$KUBE_VERSION.failed"
    reuse "$version"
    log "kubernetes $version: cold build took $((SECONDS - start)) s;" \
      "binaries $(du -sh "$(outdir "$version")" | cut -f1)," \
      "module cache $(du -sh "$(go env GOMODCACHE)" | cut -f1), build cache $(du -sh "$(go env GOCACHE)" | cut -f1)"
    exit 0
  fi
  [[ $version == "$KUBE_VERSION" ]] || { log "kubernetes $version failed too; see $LOGS"; exit 1; }
done
