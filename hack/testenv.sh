#!/usr/bin/env bash
# Build (or reuse) every real component the tests and the demo run: the control plane
# (kube-apiserver, etcd, kubectl), helm, crane, the registry, and the one-node
# Kubernetes of the node tests (kubelet, kube-controller-manager, kube-scheduler,
# kube-proxy, containerd, the pause binary, talosctl; runc, the CNI plugins, iptables and
# conntrack from Debian, and jq for these scripts). Each hack/testenv/<component>.sh is
# idempotent (see hack/testenv/lib.sh); the figures of each step are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/testenv"
source ./lib.sh
start=$SECONDS
figures=()
# debian.sh first: it installs jq, which kube.sh, gotools.sh and talosctl.sh use
for script in debian.sh kube.sh gotools.sh etcd.sh helm.sh crane.sh registry.sh promtool.sh containerd.sh pause.sh talosctl.sh; do
  [[ -f $script ]] || continue
  step=$SECONDS
  bash "$script"
  figures+=("${script%.sh} $((SECONDS - step)) s")
done
log "steps: ${figures[*]}"
log "all components ready in $((SECONDS - start)) s; $(du -sh "$TESTENV" | cut -f1) in $TESTENV;" \
  "Go build cache $(du -sh "$(go env GOCACHE)" 2>/dev/null | cut -f1)," \
  "module cache $(du -sh "$(go env GOMODCACHE)" 2>/dev/null | cut -f1)"
