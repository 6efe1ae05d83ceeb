#!/usr/bin/env bash
# The node's parts that come from Debian's packages: runc (the OCI runtime containerd's
# shim calls), the CNI plugins (bridge, host-local, loopback, portmap), iptables (the
# kubelet, kube-proxy and the bridge plugin write rules inside the node's network
# namespace) and conntrack (kube-proxy flushes stale UDP entries with it); and jq, which
# the build scripts themselves use (kube.sh, talosctl.sh and gotools.sh read the go.mod
# files Go prints as JSON), so hack/testenv.sh runs this script first. Installed with
# apt-get when one is missing; a rerun with all of them present is a no-op.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# package -> a file it installs, to tell whether it is there without asking dpkg.
declare -A WANT=(
  [runc]=/usr/sbin/runc
  [containernetworking-plugins]=/usr/lib/cni/bridge
  [iptables]=/usr/sbin/iptables
  [conntrack]=/usr/sbin/conntrack
  [jq]=/usr/bin/jq
)
missing=()
for package in "${!WANT[@]}"; do
  [[ -x ${WANT[$package]} ]] || missing+=("$package")
done
if ((${#missing[@]} == 0)); then
  log "debian packages: ${!WANT[*]} present"
  exit 0
fi
[[ $(id -u) == 0 ]] || { log "debian packages missing (${missing[*]}) and not root: install them with apt-get"; exit 1; }
start=$SECONDS
log "debian packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
for package in "${missing[@]}"; do
  [[ -x ${WANT[$package]} ]] || { log "$package installed but ${WANT[$package]} is not there"; exit 1; }
done
log "debian packages: installed ${missing[*]} in $((SECONDS - start)) s"
