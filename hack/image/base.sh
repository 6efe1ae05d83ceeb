#!/usr/bin/env bash
# The Debian base of the operator image, made here from Debian's packages, for a machine
# that cannot pull the Dockerfile's pinned python:3.11-slim-bookworm.
#
#   bash hack/image/base.sh ROOTFS_TAR
#
# writes ROOTFS_TAR: a bookworm minbase root with python3 (Debian's 3.11), venv, the CA
# certificates, netbase and tzdata, slimmed like debian:bookworm-slim (no docs, man pages
# or locales; dpkg told to keep it so). hack/image.sh imports it into the engine with the
# image config (PATH, LANG, CMD) and caches both under a key made of this file's text: edit
# the recipe and the next build makes a new base.
#
# What differs from the published base: Python is Debian's python3.11 under /usr/bin (the
# published one builds CPython under /usr/local), so the venv the Dockerfile makes runs on
# this base only; the packages are Debian's current bookworm ones, not those of the
# digest's day.
set -euo pipefail

out=${1:?usage: base.sh ROOTFS_TAR}
SUITE=${DEBIAN_SUITE:-bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=python3,python3-venv,python-is-python3,ca-certificates,netbase,tzdata

work=$(mktemp -d "${out%/*}/rootfs.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root

# debootstrap's own log says where it failed; keep it next to the output.
if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$MIRROR" \
  >"${out%.tar}.debootstrap.log" 2>&1; then
  tail -20 "${out%.tar}.debootstrap.log" >&2
  echo "debootstrap $SUITE from $MIRROR failed; log: ${out%.tar}.debootstrap.log" >&2
  exit 1
fi

# As debian:bookworm-slim does it: dpkg keeps docs, man pages and locales out, and what
# debootstrap already installed of them goes (copyright files stay).
cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
find "$root/usr/share/doc" -mindepth 1 -not -type d -not -name copyright -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root"/usr/share/{man,groff,info,lintian,linda,locale}/*
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old \
  "$root"/var/log/* "$root"/tmp/* "$root"/run/*

# What debootstrap copied from this machine does not belong in an image: the runtime
# provides resolv.conf, hostname and hosts.
rm -f "$root/etc/resolv.conf" "$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
: >"$root/etc/machine-id"

# Device nodes and mount points stay empty; the runtime fills /dev, /proc and /sys.
tar --numeric-owner --xattrs -C "$root" \
  --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
  -cf "$work/rootfs.tar" .
mv "$work/rootfs.tar" "$out"
