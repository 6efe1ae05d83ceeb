#!/usr/bin/env bash
# Build (or reuse) the Talos machinery oracle: tests/oracle, a small Go program that
# answers with upstream github.com/siderolabs/talos/pkg/machinery/compatibility so the
# differential test and `make bench` can compare the Python port with the real thing.
#
# The machinery version is the one pinned in tests/oracle/go.mod, fetched through the Go
# module proxy like any other module and checked against the committed go.sum (written by
# the go command from the proxy and the checksum database), so every build is the same
# code. The binary goes to $ICHOR_CACHE/oracle/<version>-<source stamp>/oracle, outside the repo. A rerun
# with unchanged sources is a no-op. It never resolves @latest (which may be another Talos
# minor), and there is no other route: a version the proxy does not serve is not built.
#
# Why v1.13.9 and not v1.14.x: the module proxy refuses every v1.14.x of the module, and
# its version list too, with
#   reading https://proxy.golang.org/github.com/siderolabs/talos/pkg/machinery/@v/v1.14.0-rc.1.mod: 403 Forbidden
#   server response: This module version is not available.
# (v1.14.0 itself: 404 Not Found). v1.13.9 is the newest release the proxy serves; its
# rows for target minors 1.2..1.13 are the same as 1.14's, it has no 1.14 row. So the
# differential test compares everything but Talos 1.14, whose row the vector tests in
# tests/unit/machinery check.
#
# Moving the pin once a v1.14.x is served: `hack/oracle.sh newest` asks the proxy; then
#   cd tests/oracle && go get github.com/siderolabs/talos/pkg/machinery@<version> && go mod tidy
# and `make oracle`. The differential test then compares the 1.14 cases too, by itself
# (it reads the minors the oracle knows).
#
#   hack/oracle.sh           build or reuse
#   hack/oracle.sh newest    ask the proxy for the newest v1.14.x (to move the pin)
source "$(dirname "${BASH_SOURCE[0]}")/testenv/lib.sh"
log() { printf '[oracle %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC=$ROOT/tests/oracle
MODULE=github.com/siderolabs/talos/pkg/machinery
NEXT_MINOR=v1.14

pinned() {
  sed -n "s#^[[:space:]]*$MODULE \(v[^[:space:]]*\).*#\1#p" "$SRC/go.mod" | head -n1
}
VERSION=$(pinned)
[[ -n $VERSION ]] || { log "no $MODULE requirement in $SRC/go.mod"; exit 1; }
# The pin's own minor (v1.13.9 -> 1.13): the built oracle must have a row for it.
PIN_MINOR=$(sed -E 's/^v([0-9]+\.[0-9]+)\..*/\1/' <<<"$VERSION")

if [[ ${1:-} == newest ]]; then
  # The proxy alone (no direct fallback: no VCS host is reachable here), so its own
  # answer is what is printed.
  proxy=$(go env GOPROXY)
  proxy=${proxy%%[,|]*}
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  cd "$scratch"
  if versions=$(GOPROXY=$proxy go list -m -versions "$MODULE" 2>&1); then
    newest=$(tr ' ' '\n' <<<"$versions" | grep -E "^${NEXT_MINOR//./\\.}\." | sort -V | tail -n1 || true)
    log "pinned $VERSION; newest $NEXT_MINOR.x the proxy lists: ${newest:-none}"
  else
    log "the proxy did not list $MODULE:"
    printf '%s\n' "$versions" | sed 's/^/    /' >&2
    # Without a list, ask for the first release of the next minor by name.
    if answer=$(GOPROXY=$proxy go list -m "$MODULE@$NEXT_MINOR.0" 2>&1); then
      log "pinned $VERSION; the proxy serves $answer"
    else
      log "pinned $VERSION; $NEXT_MINOR.0 is not served either:"
      printf '%s\n' "$answer" | sed 's/^/    /' >&2
    fi
  fi
  log "to move the pin: cd tests/oracle && go get $MODULE@<version> && go mod tidy; make oracle"
  exit 0
fi

# The stamp ties the binary to the sources it was built from (program, go.mod, go.sum),
# and names its folder: checkouts with other oracle sources (another branch, another
# worktree) each keep their own binary instead of rebuilding one over the other's.
stamp=$(cat "$SRC/main.go" "$SRC/go.mod" "$SRC/go.sum" | sha256sum | cut -d' ' -f1)
dir=$ICHOR_CACHE/oracle/$VERSION-${stamp:0:12}
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
  log "oracle: not built: the module proxy did not serve $MODULE@$VERSION:"
  printf '%s\n' "$fetch_error" | sed 's/^/    /' >&2
  log "oracle: pin a version the proxy serves (hack/oracle.sh newest), see the top of $0"
  exit 1
fi

with_progress "oracle (machinery $VERSION)" \
  bash -c 'cd "$1" && go build -trimpath -ldflags="-s -w" -o "$2/oracle" .' _ "$SRC" "$tmp"

info=$("$tmp/oracle" version)
if ! grep -q "\"version\":\"$VERSION\"" <<<"$info" || ! grep -q "\"$PIN_MINOR\"" <<<"$info"; then
  log "oracle: the built program does not report machinery $VERSION with a $PIN_MINOR row: $info"
  exit 1
fi
if grep -q '"replaced"' <<<"$info"; then
  log "oracle: machinery was replaced (a replace directive in go.mod): only the proxy's module is used: $info"
  exit 1
fi
printf '%s\n' "$stamp" >"$tmp/source.sha256"
rm -rf "$dir" && mv "$tmp" "$dir"
trap - EXIT
log "oracle: built $dir/oracle in $((SECONDS - start)) s: $info"
