#!/usr/bin/env bash
# Build (or reuse) the Talos machinery oracle: tests/oracle, a small Go program that
# answers with upstream github.com/siderolabs/talos/pkg/machinery/compatibility so the
# differential test and `make bench` can compare the Python port with the real thing.
#
# The machinery version is the one pinned in tests/oracle/go.mod (its hashes are in the
# committed go.sum, so every build is the same code); the binary goes to
# $ICHOR_CACHE/oracle/<version>/oracle, outside the repo. A rerun with unchanged sources
# is a no-op. It never resolves @latest (which may be another Talos minor).
#
# If the module proxy refuses the pinned version, the build stops with the proxy's exact
# error, unless ORACLE_TALOS_GIT names a clone of https://github.com/siderolabs/talos that
# holds the tag pkg/machinery/<version>: the module is then zipped from that tag the way
# the go command does it and served from a local file proxy; go still checks it against
# go.sum, so a different tree fails with a checksum mismatch rather than building.
#
#   hack/oracle.sh           build or reuse
#   hack/oracle.sh newest    ask the proxy for the newest v1.14.x (to move the pin)
source "$(dirname "${BASH_SOURCE[0]}")/testenv/lib.sh"
log() { printf '[oracle %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC=$ROOT/tests/oracle
MODULE=github.com/siderolabs/talos/pkg/machinery
MINOR=v1.14

pinned() {
  sed -n "s#^[[:space:]]*$MODULE \(v[^[:space:]]*\).*#\1#p" "$SRC/go.mod" | head -n1
}
VERSION=$(pinned)
[[ -n $VERSION ]] || { log "no $MODULE requirement in $SRC/go.mod"; exit 1; }

if [[ ${1:-} == newest ]]; then
  if ! versions=$(cd "$(mktemp -d)" && go list -m -versions "$MODULE" 2>&1); then
    log "the proxy did not list $MODULE: $versions"
    exit 1
  fi
  newest=$(tr ' ' '\n' <<<"$versions" | grep -E "^${MINOR//./\\.}\." | sort -V | tail -n1 || true)
  log "pinned $VERSION; newest $MINOR.x the proxy lists: ${newest:-none}"
  log "to move the pin: cd tests/oracle && go get $MODULE@<version> && go mod tidy"
  exit 0
fi

[[ $VERSION == "$MINOR".* ]] || log "warning: pinned $VERSION is not a $MINOR.x release"

dir=$ICHOR_CACHE/oracle/$VERSION
# The stamp ties the binary to the sources it was built from (program, go.mod, go.sum).
stamp=$(cat "$SRC/main.go" "$SRC/go.mod" "$SRC/go.sum" | sha256sum | cut -d' ' -f1)
if [[ -x $dir/oracle && $(cat "$dir/source.sha256" 2>/dev/null) == "$stamp" ]]; then
  log "oracle: cached at $dir (machinery $VERSION)"
  exit 0
fi

start=$SECONDS
tmp=$dir.tmp
rm -rf "$tmp" && mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

log "oracle: fetching $MODULE@$VERSION through $(go env GOPROXY)"
if ! fetch_error=$(cd "$SRC" && go mod download "$MODULE" 2>&1); then
  log "oracle: the module proxy did not serve $MODULE@$VERSION:"
  printf '%s\n' "$fetch_error" | sed 's/^/    /' >&2
  if [[ -z ${ORACLE_TALOS_GIT:-} ]]; then
    log "oracle: not built. Set GOPROXY to a proxy that serves it, or ORACLE_TALOS_GIT to a"
    log "clone of https://github.com/siderolabs/talos holding tag pkg/machinery/$VERSION"
    log "(the module is then zipped from that tag and still checked against go.sum)."
    exit 1
  fi
  log "oracle: zipping $MODULE@$VERSION from $ORACLE_TALOS_GIT (tag pkg/machinery/$VERSION)"
  (cd "$SRC/modproxy" && go build -trimpath -o "$tmp/modproxy" .)
  "$tmp/modproxy" -repo "$ORACLE_TALOS_GIT" -module "$MODULE" -version "$VERSION" \
    -subdir pkg/machinery -out "$tmp/proxy" >&2
  export GOPROXY="file://$tmp/proxy,$(go env GOPROXY)"
fi

with_progress "oracle (machinery $VERSION)" \
  bash -c 'cd "$1" && go build -trimpath -ldflags="-s -w" -o "$2/oracle" .' _ "$SRC" "$tmp"

info=$("$tmp/oracle" version)
if ! grep -q "\"version\":\"$VERSION\"" <<<"$info" || ! grep -q "\"${MINOR#v}\"" <<<"$info"; then
  log "oracle: the built program does not report machinery $VERSION with ${MINOR#v} rows: $info"
  exit 1
fi
printf '%s\n' "$stamp" >"$tmp/source.sha256"
rm -rf "$tmp/proxy" "$tmp/modproxy"
rm -rf "$dir" && mv "$tmp" "$dir"
trap - EXIT
log "oracle: built $dir/oracle in $((SECONDS - start)) s: $info"
