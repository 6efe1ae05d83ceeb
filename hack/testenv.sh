#!/usr/bin/env bash
# Build (or reuse) every real component the tests and the demo run.
# Each hack/testenv/<component>.sh is idempotent; see hack/testenv/lib.sh.
set -euo pipefail
cd "$(dirname "$0")/testenv"
source ./lib.sh
start=$SECONDS
for script in kube.sh etcd.sh helm.sh crane.sh registry.sh; do
  [[ -f $script ]] || continue
  bash "$script"
done
log "all components ready in $((SECONDS - start)) s; $(du -sh "$TESTENV" | cut -f1) in $TESTENV"
