# Shared by the hack/testenv/*.sh build scripts (sourced, not run).
# Every binary is built from its Go module into a versioned folder of the cache,
# outside the repo, and linked from $TESTENV/bin/<name>; a second run is a no-op.
set -euo pipefail
ICHOR_CACHE=${ICHOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ichor}
TESTENV=${ICHOR_TESTENV:-$ICHOR_CACHE/testenv}
export GOTOOLCHAIN=local CGO_ENABLED=0
mkdir -p "$TESTENV/bin"

log() { printf '[testenv %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# link NAME PATH: point $TESTENV/bin/NAME at a built binary.
link() { ln -sfn "$2" "$TESTENV/bin/$1"; }

# have NAME DIR: true when DIR/NAME exists and is linked; prints the reuse.
have() {
  if [[ -x "$2/$1" ]]; then link "$1" "$2/$1"; log "$1: cached at $2"; return 0; fi
  return 1
}

# with_progress LABEL CMD...: run a long command, printing a heartbeat every 30 s
# so a multi-minute build never looks hung.
with_progress() {
  local label=$1; shift
  local start=$SECONDS
  "$@" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 30 & wait $! || true
    kill -0 "$pid" 2>/dev/null && log "$label: still building ($((SECONDS - start)) s)"
  done
  wait "$pid"
  log "$label: done in $((SECONDS - start)) s"
}
