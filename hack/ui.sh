#!/usr/bin/env bash
# The Headlamp plugin (ui/headlamp), what `make ui` and `make test` run:
#   build    npm ci from the committed lockfile (only when the lockfile changed since the
#            last install), the plugin (headlamp-plugin build: dist/main.js), the browser
#            test's host page (build/harness, only when its inputs changed), and Debian's
#            chromium when /usr/bin/chromium is missing (apt-get, as root)
#   unit     the type check (tsc), the tooling's lint (eslint with jsx-a11y), and the
#            Vitest tests: the mappings, every story as a snapshot, axe-core
#   package  the archive Headlamp installs, its sha256 and the Artifact Hub manifest
# Each step prints its seconds (CI's budget, docs/development.md).
set -euo pipefail
cd "$(dirname "$0")/../ui/headlamp"

log() { printf '[ui %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "$*"; exit 1; }
timed() {
  local label=$1 start=$SECONDS
  shift
  "$@"
  log "$label: $((SECONDS - start)) s"
}

command -v npm >/dev/null || die "npm missing: install Node.js 20 and npm (the plugin tooling needs them)"

lock_sum() { sha256sum package-lock.json | cut -d' ' -f1; }

install() {
  local stamp=node_modules/.ichor-lockfile
  if [[ -f $stamp && $(cat "$stamp") == "$(lock_sum)" ]]; then
    log "npm packages: installed from this lockfile already"
    return
  fi
  # The registry's tarballs are checked against the lockfile's integrity; install
  # scripts are not run (npm 11 asks for an allow-list; the build needs none).
  timed "npm ci" npm ci --no-audit --no-fund --loglevel=error
  lock_sum >"$stamp"
  log "node_modules: $(du -sh node_modules | cut -f1)"
}

chromium() {
  if [[ -x /usr/bin/chromium ]]; then
    log "chromium: $(/usr/bin/chromium --version 2>/dev/null | head -1)"
    return
  fi
  [[ $(id -u) == 0 ]] || die "chromium missing and not root: install Debian's chromium with apt-get"
  command -v apt-get >/dev/null || die "chromium missing and no apt-get: install chromium at /usr/bin/chromium"
  local start=$SECONDS
  log "chromium: installing Debian's package"
  apt-get update -qq -o DPkg::Lock::Timeout=600 >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -o DPkg::Lock::Timeout=600 chromium >&2
  [[ -x /usr/bin/chromium ]] || die "chromium installed but /usr/bin/chromium is not there"
  log "chromium: installed in $((SECONDS - start)) s"
}

harness() {
  # The host page is large (Headlamp's frontend library) and its inputs rarely change.
  local sum stamp=build/harness/.inputs
  sum=$(cat package-lock.json harness/* | sha256sum | cut -d' ' -f1)
  if [[ -f $stamp && $(cat "$stamp") == "$sum" ]]; then
    log "host page: built from these inputs already"
    return
  fi
  timed "host page (vite build)" npx vite build -c harness/vite.config.mjs
  echo "$sum" >"$stamp"
}

case ${1:-build} in
build)
  install
  timed "plugin (headlamp-plugin build)" npx headlamp-plugin build . >/dev/null
  harness
  chromium
  ;;
unit)
  install
  timed "tsc" npx tsc --noEmit -p tsconfig.json
  timed "lint (headlamp-plugin lint)" npx headlamp-plugin lint . >/dev/null
  CI=true UNDER_TEST=true timed "vitest" \
    npx vitest run -c node_modules/@kinvolk/headlamp-plugin/config/vite.config.mjs
  ;;
package)
  install
  timed "plugin (headlamp-plugin build)" npx headlamp-plugin build . >/dev/null
  node scripts/package.mjs
  ;;
*)
  die "usage: hack/ui.sh build|unit|package"
  ;;
esac
