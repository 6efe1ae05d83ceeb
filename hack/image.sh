#!/usr/bin/env bash
# The operator image from the repository's Dockerfile, on a machine with or without a
# Docker engine (`make image`, `make image-base`).
#
#   bash hack/image.sh build    # build IMAGE; then write IMAGE_OUTPUT and push IMAGE_PUSH
#   bash hack/image.sh base     # make (or reuse) the Debian base only; prints its name
#   bash hack/image.sh key      # the source key a build is cached under (see below)
#
# Settings (environment; `make image VAR=...` passes them):
#   IMAGE         the name to tag (default ghcr.io/ichor-dev/ichor-operator:<version>)
#   IMAGE_ENGINE  auto (default: the Docker engine when one answers, else buildah), docker,
#                 buildah. buildah is installed from Debian when missing.
#   IMAGE_BASE    auto (default: the Dockerfile's pinned base when it is present or can be
#                 pulled, else the Debian base), published, debian, or an image name.
#   IMAGE_OUTPUT  also write the image to a file: PATH (an OCI archive, named IMAGE inside),
#                 or a buildah destination such as oci:DIR:NAME (an OCI layout).
#   IMAGE_PUSH    also push it to this name (host[:port]/repository:tag); a loopback
#                 registry is spoken to over plain HTTP.
#   IMAGE_REBUILD 1: build even when an image of the same sources is cached (for a fresh
#                 resolve of the Python dependencies, which the source key does not see).
#
# A built image is kept in the engine's store under a name keyed by its sources
# (`bash hack/image.sh key`: the Dockerfile, .dockerignore and every file the Dockerfile
# copies, plus the base), so the image test and the node tests of one `make test` build it
# once, and a rerun on unchanged sources only tags and ships it. The last CACHE_KEEP
# source states are kept.
#
# Without a Docker engine, buildah runs the Dockerfile's RUN steps in a chroot on the host
# network (no netavark: no iptables chains, no ip_forward change), with the host's CA
# bundle mounted for those steps only (this machine's HTTPS goes through its own CA); the
# image keeps the base's bundle. Its storage lives in $ICHOR_CACHE/image/, nowhere else.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ICHOR_CACHE=${ICHOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ichor}
CACHE=$ICHOR_CACHE/image
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -1)
IMAGE=${IMAGE:-ghcr.io/ichor-dev/ichor-operator:$VERSION}
IMAGE_ENGINE=${IMAGE_ENGINE:-auto}
IMAGE_BASE=${IMAGE_BASE:-auto}
IMAGE_OUTPUT=${IMAGE_OUTPUT:-}
IMAGE_PUSH=${IMAGE_PUSH:-}
PUBLISHED_BASE=$(sed -n 's/^ARG PYTHON_IMAGE=//p' "$ROOT/Dockerfile")
HOST_CA=/etc/ssl/certs/ca-certificates.crt
# The base's cache key: the recipe's own text, so editing it makes a new base.
BASE_KEY=$({ cat "$ROOT/hack/image/base.sh"; echo "${DEBIAN_SUITE:-bookworm}"; } | sha256sum | cut -c1-12)
DEBIAN_BASE=localhost/ichor-base:$BASE_KEY

CACHE_REPOSITORY=localhost/ichor-operator-cache
CACHE_KEEP=${CACHE_KEEP:-4}

# The files that go into the image: what the Dockerfile COPYs, as .dockerignore lets in.
# Python's byte code is left out by both, and by the key.
source_files() {
  (cd "$ROOT" && find pyproject.toml README.md LICENSE ichor -type f \
    ! -path '*/__pycache__/*' ! -name '*.pyc' | LC_ALL=C sort)
}

# source_key BASE: a hash of the recipe, of every file it copies (path and bytes) and of
# the base it builds on.
source_key() {
  {
    printf 'base %s\n' "$1"
    (cd "$ROOT" && sha256sum Dockerfile .dockerignore)
    source_files | (cd "$ROOT" && xargs -d '\n' sha256sum)
  } | sha256sum | cut -c1-16
}

log() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# --- engine -------------------------------------------------------------------------
docker_engine() { command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; }

choose_engine() {
  case $IMAGE_ENGINE in
    auto) if docker_engine; then IMAGE_ENGINE=docker; else IMAGE_ENGINE=buildah; fi ;;
    docker) docker_engine || die "IMAGE_ENGINE=docker, but no Docker engine answers (docker info)" ;;
    buildah) ;;
    *) die "IMAGE_ENGINE=$IMAGE_ENGINE: use auto, docker or buildah" ;;
  esac
  log "engine: $IMAGE_ENGINE"
}

# apt_install PACKAGE...: the Debian packages that are missing, installed.
apt_install() {
  local missing=()
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed' \
      || missing+=("$package")
  done
  ((${#missing[@]})) || return 0
  local start=$SECONDS
  log "installing ${missing[*]} from Debian"
  command -v apt-get >/dev/null || die "${missing[*]} missing and no apt-get: install them"
  apt-get update -qq -o DPkg::Lock::Timeout=600 >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -o DPkg::Lock::Timeout=600 "${missing[@]}" >&2
  log "installed ${missing[*]} in $((SECONDS - start)) s"
}

# buildah reads its storage and engine settings from files of ours, in the cache.
configure_buildah() {
  apt_install buildah
  mkdir -p "$CACHE/conf" "$CACHE/storage" "$CACHE/run" "$CACHE/conf/networks"
  cat >"$CACHE/conf/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$CACHE/storage"
runroot = "$CACHE/run"
EOF
  # network_config_dir: even with --network host, buildah's CNI backend takes a lock
  # file in its configuration folder, /etc/cni/net.d by default, which would stay on a
  # machine where no container network was ever set up.
  cat >"$CACHE/conf/containers.conf" <<EOF
[engine]
cgroup_manager = "cgroupfs"
events_logger = "none"

[network]
network_config_dir = "$CACHE/conf/networks"
EOF
  cat >"$CACHE/conf/registries.conf" <<'EOF'
unqualified-search-registries = []
EOF
  export CONTAINERS_STORAGE_CONF=$CACHE/conf/storage.conf \
    CONTAINERS_CONF=$CACHE/conf/containers.conf \
    CONTAINERS_REGISTRIES_CONF=$CACHE/conf/registries.conf
}

has_image() {
  case $IMAGE_ENGINE in
    docker) docker image inspect "$1" >/dev/null 2>&1 ;;
    buildah) buildah inspect --type image "$1" >/dev/null 2>&1 ;;
  esac
}

# image_size NAME: as the engine prints it ("129 MB"), uncompressed.
image_size() {
  case $IMAGE_ENGINE in
    docker) docker image ls --format '{{.Size}}' "$1" | head -1 ;;
    buildah) buildah images --format '{{.Size}}' --noheading "$1" | head -1 ;;
  esac
}

# --- host state a build must leave as it found it -------------------------------------
# With --network host buildah never calls netavark; this still checks, and undoes what a
# network backend would leave: its iptables chains and ip_forward.
snapshot_host() {
  FORWARD_BEFORE=$(cat /proc/sys/net/ipv4/ip_forward)
  CHAINS_BEFORE=$(host_chains)
}

host_chains() {
  command -v iptables-save >/dev/null || return 0
  iptables-save 2>/dev/null | awk '/^\*/ {t=$1} /^:/ {print t, substr($1, 2)}' | sort
}

restore_host() {
  local now
  now=$(cat /proc/sys/net/ipv4/ip_forward)
  if [[ $now != "$FORWARD_BEFORE" ]]; then
    log "net.ipv4.ip_forward went $FORWARD_BEFORE -> $now during the build: restored"
    echo "$FORWARD_BEFORE" >/proc/sys/net/ipv4/ip_forward
  fi
  local table chain
  while read -r table chain; do
    [[ -n $chain && ! $chain =~ ^(INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING)$ ]] || continue
    table=${table#\*}
    # Only a container network backend's own chains; another program's are not ours.
    if [[ ! $chain =~ ^(NETAVARK|CNI-|PODMAN) ]]; then
      log "iptables chain $chain ($table) appeared during the build; not a build's, left alone"
      continue
    fi
    log "iptables chain $chain ($table) appeared during the build: removed"
    iptables -t "$table" -S | grep -E -- "-j $chain( |$)" | sed 's/^-A /-D /' \
      | while read -r rule; do eval "iptables -t $table $rule"; done
    iptables -t "$table" -F "$chain" && iptables -t "$table" -X "$chain"
  done < <(comm -13 <(echo "$CHAINS_BEFORE") <(host_chains))
}

# --- base ---------------------------------------------------------------------------
# The Debian base: the root filesystem is cached as a tar under its key, and imported
# into the engine once; a later build finds the image and does nothing.
debian_base() {
  if has_image "$DEBIAN_BASE"; then
    log "base: $DEBIAN_BASE cached ($(image_size "$DEBIAN_BASE"))"
    return 0
  fi
  local dir=$CACHE/base/$BASE_KEY start=$SECONDS
  mkdir -p "$dir"
  if [[ -f $dir/rootfs.tar ]]; then
    log "base: root filesystem cached at $dir/rootfs.tar"
  else
    apt_install debootstrap
    log "base: debootstrap of Debian bookworm (cold; about a minute or two)"
    bash "$ROOT/hack/image/base.sh" "$dir/rootfs.tar"
    log "base: root filesystem made in $((SECONDS - start)) s, $(du -h "$dir/rootfs.tar" | cut -f1)"
  fi
  local step=$SECONDS
  case $IMAGE_ENGINE in
    docker)
      docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
        "$dir/rootfs.tar" "$DEBIAN_BASE" >/dev/null ;;
    buildah)
      # A working container of our own; cleanup removes it if the import stops halfway.
      BASE_CONTAINER=$(buildah from --name "ichor-base-$BASE_KEY-$$" scratch)
      local container=$BASE_CONTAINER
      buildah add --quiet "$container" "$dir/rootfs.tar" / >/dev/null
      # The Dockerfile's `ENV PATH=/opt/ichor/bin:$PATH` needs a PATH to extend.
      buildah config \
        --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --env LANG=C.UTF-8 --cmd '["python3"]' \
        --label org.opencontainers.image.description="Debian bookworm with Debian's python3, made by hack/image/base.sh" \
        "$container"
      buildah commit --quiet --rm "$container" "$DEBIAN_BASE" >/dev/null
      BASE_CONTAINER= ;;
  esac
  log "base: imported as $DEBIAN_BASE in $((SECONDS - step)) s ($(image_size "$DEBIAN_BASE")); base ready in $((SECONDS - start)) s"
}

pull_published() {
  local out
  case $IMAGE_ENGINE in
    docker) out=$(timeout 300 docker pull "$PUBLISHED_BASE" 2>&1) ;;
    buildah) out=$(timeout 300 buildah pull --quiet "$PUBLISHED_BASE" 2>&1) ;;
  esac || { log "base: $PUBLISHED_BASE could not be pulled: ${out##*$'\n'}"; return 1; }
}

# Sets BASE to the image the Dockerfile's PYTHON_IMAGE names.
choose_base() {
  case $IMAGE_BASE in
    published)
      has_image "$PUBLISHED_BASE" || pull_published || die "IMAGE_BASE=published and no pull"
      BASE=$PUBLISHED_BASE ;;
    auto)
      if has_image "$PUBLISHED_BASE" || pull_published; then
        BASE=$PUBLISHED_BASE
      else
        log "base: using the Debian base instead (what differs: docs/install.md, 'The operator image')"
        debian_base
        BASE=$DEBIAN_BASE
      fi ;;
    debian) debian_base; BASE=$DEBIAN_BASE ;;
    *) has_image "$IMAGE_BASE" || die "IMAGE_BASE=$IMAGE_BASE is not in the $IMAGE_ENGINE store"
       BASE=$IMAGE_BASE ;;
  esac
}

# --- build and ship -----------------------------------------------------------------
build() {
  local start=$SECONDS key cached
  key=$(source_key "$BASE")
  cached=$CACHE_REPOSITORY:$key
  if [[ ${IMAGE_REBUILD:-0} != 1 ]] && has_image "$cached"; then
    tag_image "$cached" "$IMAGE"
    log "build: reused $cached for $IMAGE (sources and base unchanged; IMAGE_REBUILD=1 builds anyway)"
    return 0
  fi
  log "build: $IMAGE on $BASE (source key $key)"
  case $IMAGE_ENGINE in
    docker)
      docker build --pull=false --build-arg "PYTHON_IMAGE=$BASE" -t "$IMAGE" "$ROOT" >&2 ;;
    buildah)
      local ca=()
      [[ -f $HOST_CA ]] && ca=(--volume "$HOST_CA:$HOST_CA:ro")
      buildah bud --isolation chroot --network host --pull=never --layers=false \
        "${ca[@]}" --build-arg "PYTHON_IMAGE=$BASE" -t "$IMAGE" -f "$ROOT/Dockerfile" \
        "$ROOT" >&2
      ;;
  esac
  tag_image "$IMAGE" "$cached"
  forget_old_builds
  log "build: $IMAGE built in $((SECONDS - start)) s; $(image_size "$IMAGE") uncompressed; kept as $cached"
}

tag_image() {
  case $IMAGE_ENGINE in
    docker) docker tag "$1" "$2" ;;
    buildah) buildah tag "$1" "$2" ;;
  esac
}

# Only the newest CACHE_KEEP source states stay; an image replaced under its name stays
# behind untagged: dropped too.
forget_old_builds() {
  local old
  case $IMAGE_ENGINE in
    docker)
      docker image ls --format '{{.CreatedAt}}|{{.Repository}}:{{.Tag}}' \
        | grep -F "|$CACHE_REPOSITORY:" | sort -r | tail -n +$((CACHE_KEEP + 1)) | cut -d"|" -f2 \
        | while read -r old; do docker rmi "$old" >/dev/null 2>&1 || true; done ;;
    buildah)
      buildah images --noheading --format '{{.CreatedAtRaw}}|{{.Name}}:{{.Tag}}' \
        | grep -F "|$CACHE_REPOSITORY:" | sort -r | tail -n +$((CACHE_KEEP + 1)) | cut -d"|" -f2 \
        | while read -r old; do buildah rmi "$old" >/dev/null 2>&1 || true; done
      buildah rmi --prune >/dev/null 2>&1 || true ;;
  esac
}

loopback() { [[ $1 =~ ^(127\.[0-9.]+|localhost|\[::1\])(:[0-9]+)?/ ]]; }

ship() {
  local start
  if [[ -n $IMAGE_OUTPUT ]]; then
    start=$SECONDS
    local destination=$IMAGE_OUTPUT file
    case $destination in
      *:*) file=${destination#*:}; file=${file%%:*} ;;
      *) file=$destination; destination="oci-archive:$destination:$IMAGE" ;;
    esac
    mkdir -p "$(dirname "$file")"
    case $IMAGE_ENGINE in
      docker)
        [[ $destination == oci-archive:* ]] || die "with Docker IMAGE_OUTPUT is a file path"
        docker save -o "$file" "$IMAGE" ;;
      buildah) buildah push --quiet "$IMAGE" "$destination" >/dev/null ;;
    esac
    log "output: $destination in $((SECONDS - start)) s, $(du -sh "$file" | cut -f1)"
  fi
  if [[ -n $IMAGE_PUSH ]]; then
    start=$SECONDS
    local tls=true digest
    loopback "$IMAGE_PUSH" && tls=false
    case $IMAGE_ENGINE in
      docker)
        docker tag "$IMAGE" "$IMAGE_PUSH" && docker push "$IMAGE_PUSH" >&2
        digest=$(docker image inspect -f '{{index .RepoDigests 0}}' "$IMAGE_PUSH") ;;
      buildah)
        buildah push --quiet --tls-verify="$tls" --digestfile "$CACHE/run/digest.$$" \
          "$IMAGE" "docker://$IMAGE_PUSH" >/dev/null
        digest=$(cat "$CACHE/run/digest.$$"); rm -f "$CACHE/run/digest.$$" ;;
    esac
    log "push: $IMAGE_PUSH ($digest) in $((SECONDS - start)) s"
    echo "$IMAGE_PUSH@${digest##*@}"
  fi
}

# --- main ---------------------------------------------------------------------------
command=${1:-build}
case $command in build|base|key) ;; *) die "usage: hack/image.sh build|base|key" ;; esac
if [[ $command == key ]]; then
  # the key of the sources as they are, for the base IMAGE_BASE names (the Debian base
  # unless it names an image)
  case $IMAGE_BASE in auto|debian) key_base=$DEBIAN_BASE ;; published) key_base=$PUBLISHED_BASE ;; *) key_base=$IMAGE_BASE ;; esac
  source_key "$key_base"
  exit 0
fi
mkdir -p "$CACHE"
# One build at a time per cache: the base, the storage and its pruning are shared.
exec 9>"$CACHE/lock"
flock -n 9 || { log "another image build holds $CACHE/lock: waiting"; flock 9; }
total=$SECONDS
choose_engine
[[ $IMAGE_ENGINE == buildah ]] && configure_buildah
BASE_CONTAINER=
cleanup() {
  [[ -z $BASE_CONTAINER ]] || buildah rm "$BASE_CONTAINER" >/dev/null 2>&1 || true
  restore_host
}
snapshot_host
trap cleanup EXIT
if [[ $command == base ]]; then
  debian_base
  echo "$DEBIAN_BASE"
  exit 0
fi
choose_base
build
ship
log "done in $((SECONDS - total)) s: $IMAGE"
