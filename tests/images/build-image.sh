#!/bin/bash
# Builds a minimal Debian root file system for tests, once, and prints its path.
#
#   tests/images/build-image.sh SUITE [PACKAGE...] [--apt [--no-install-recommends] PACKAGE...]
#
# The root is `mmdebstrap --variant=minbase SUITE` plus PACKAGE... (with their
# hard dependencies, as debootstrap --include installs them). Packages after
# `--apt` are then installed inside the root by `apt-get install`, the way an
# operator installs them on a node (their maintainer scripts run, their units
# are enabled); `--no-install-recommends` right after `--apt` passes that
# option to that apt-get, as the operator's procedure does. The root is cached
# under
#   ${WARDEN_IMAGE_CACHE:-/var/cache/etcd-warden-test/images}/<key>
# where <key> is a hash of the suite, both sorted package lists, the apt
# options and this script's layout version: what decides the root's content.
# The layout version is bumped whenever the way the root is built changes
# what it holds; a change that leaves the content as it was (a comment, a
# faster build of the same root) keeps the key, so that a clone on the same
# machine keeps its cache. Callers treat the printed directory as read-only
# (use an overlay or a copy of it): every test starts from the same root.
#
# A missing cache, a half-built one (no `.image-complete` marker) or one older
# than WARDEN_IMAGE_MAX_AGE_DAYS (default 30: the suite's package lists and
# security fixes move on) is rebuilt, never an error. The build happens in a
# temporary directory beside the cache and is renamed into place when complete,
# so an interrupted build never leaves a root that looks usable. Concurrent
# callers for the same key wait on a lock instead of building twice.
#
# Packages come from the Debian mirror the host's apt uses (its first `deb`
# line or `URIs:` field), or from DEBIAN_MIRROR when set. Inside the root,
# /usr/sbin/policy-rc.d forbids starting services: packages installed into it
# later (pacemaker, etcd-server) must not start daemons in a chroot.
#
# What makes the build fast (measured in docs/benchmarks.md, "Field nodes"):
# mmdebstrap resolves and downloads the base in one apt run instead of
# debootstrap's package-by-package second stage; while the root is built,
# dpkg skips its fsyncs (force-unsafe-io: a half-built root is thrown away
# anyway) and leaves out manual pages, documentation and translations (a test
# node never reads them). Both settings are removed before the root is used:
# a package a test installs later (the project's .deb) installs as it would
# on any host, documentation included.
#
# Progress goes to stderr; stdout carries only the path.
set -euo pipefail

# Bump when the content of the built root changes, so old caches are rebuilt.
# 2: built by mmdebstrap; no manual pages, documentation or translations of
# the packages installed while building.
LAYOUT_VERSION=2

usage() {
    echo "usage: $0 SUITE [PACKAGE...] [--apt [--no-install-recommends] PACKAGE...]   (e.g. $0 bookworm man-db)" >&2
    exit 2
}
[ $# -ge 1 ] || usage
suite=$1
shift
base_pkgs=()
apt_pkgs=()
apt_opts=()
seen_apt=
for a in "$@"; do
    if [ "$a" = --apt ]; then seen_apt=1; continue; fi
    if [ -n "$seen_apt" ]; then
        case $a in
            --no-install-recommends) apt_opts+=("$a") ;;
            -*) usage ;;
            *) apt_pkgs+=("$a") ;;
        esac
    else
        base_pkgs+=("$a")
    fi
done
case $suite in
    ''|*/*|-*) echo "build-image.sh: bad suite name '$suite'" >&2; exit 2 ;;
esac

if [ "$(id -u)" != 0 ]; then
    echo "build-image.sh: needs root (mmdebstrap and chroot)" >&2
    exit 1
fi
if ! command -v mmdebstrap >/dev/null; then
    echo "build-image.sh: mmdebstrap is missing; run 'apt-get install mmdebstrap' (or 'make deps')" >&2
    exit 1
fi

cache=${WARDEN_IMAGE_CACHE:-/var/cache/etcd-warden-test/images}
max_age_days=${WARDEN_IMAGE_MAX_AGE_DAYS:-30}
packages=$(printf '%s\n' "${base_pkgs[@]}" | sed '/^$/d' | LC_ALL=C sort -u | paste -sd, -)
apt_packages=$(printf '%s\n' "${apt_pkgs[@]}" | sed '/^$/d' | LC_ALL=C sort -u | paste -sd, -)
apt_options=$(printf '%s\n' "${apt_opts[@]}" | sed '/^$/d' | LC_ALL=C sort -u | paste -sd, -)
key=$( { printf 'layout=%s\nsuite=%s\nvariant=minbase\npackages=%s\n' "$LAYOUT_VERSION" "$suite" "$packages"
         [ -z "$apt_packages" ] || printf 'apt=%s\n' "$apt_packages"
         [ -z "$apt_options" ] || printf 'apt-options=%s\n' "$apt_options"; } | sha256sum | cut -c1-16)
image="$cache/$key"
marker="$image/.image-complete"

log() { echo "build-image.sh: $*" >&2; }

fresh() {
    [ -f "$marker" ] || return 1
    [ -z "$(find "$marker" -mtime "+$max_age_days" 2>/dev/null)" ]
}

mkdir -p "$cache"
exec 9>"$cache/.lock-$key"
flock 9

if fresh; then
    log "cached: $image (suite $suite, packages: ${packages:-none}${apt_packages:+, apt: $apt_packages})"
    echo "$image"
    exit 0
fi

# The host's Debian mirror, or DEBIAN_MIRROR (debian-debs.sh says which is
# missing and fails when neither is there).
mirror=$("$(dirname "$0")/debian-debs.sh" mirror) || exit 1

tmp=$(mktemp -d "$cache/.build-$key.XXXXXX")
# Removed on every exit path; after the final rename it is empty.
trap 'rm -rf --one-file-system "$tmp"' EXIT
trap 'exit 143' TERM INT
root="$tmp/root"

# dpkg's settings while the root is built (see the header); mmdebstrap writes
# them to this file inside the root, and it is removed before the root is used.
build_dpkg_cfg=etc/dpkg/dpkg.cfg.d/99mmdebstrap
build_apt_cfg=etc/apt/apt.conf.d/99mmdebstrap
dpkgopts=(
    --dpkgopt=force-unsafe-io
    --dpkgopt='path-exclude=/usr/share/man/*'
    --dpkgopt='path-exclude=/usr/share/locale/*'
    --dpkgopt='path-include=/usr/share/locale/locale.alias'
    --dpkgopt='path-exclude=/usr/share/doc/*'
    --dpkgopt='path-include=/usr/share/doc/*/copyright'
    --dpkgopt='path-exclude=/usr/share/info/*'
)

start=$(date +%s)
log "building $suite (minbase${packages:+ + $packages}${apt_packages:+, then apt-get install ${apt_opts[*]:+${apt_opts[*]} }$apt_packages}) into $image; this takes a few minutes once"
include=()
[ -n "$packages" ] && include=(--include="$packages")
# mmdebstrap's own log is long; keep it for a failure, show one line a stage.
if ! mmdebstrap --mode=root --variant=minbase "${include[@]}" "${dpkgopts[@]}" \
        --aptopt='Acquire::Languages "none"' \
        "$suite" "$root" "$mirror" >"$tmp/mmdebstrap.log" 2>&1; then
    tail -n 40 "$tmp/mmdebstrap.log" >&2
    echo "build-image.sh: mmdebstrap $suite failed (log above)" >&2
    exit 1
fi
log "mmdebstrap done after $(( $(date +%s) - start )) s"

# No service may start inside the chroot (invoke-rc.d and deb-systemd-invoke
# both honour policy-rc.d).
cat > "$root/usr/sbin/policy-rc.d" <<'EOF2'
#!/bin/sh
# Test image: never start services in a chroot.
exit 101
EOF2
chmod 0755 "$root/usr/sbin/policy-rc.d"

if [ ${#apt_pkgs[@]} -gt 0 ]; then
    # apt inside the root, as on a node: it needs /proc, /dev and name resolution.
    # The mounts live in a private mount namespace so that they vanish with it on
    # every exit path.
    apt_start=$(date +%s)
    log "apt-get install ${apt_opts[*]:+${apt_opts[*]} }${apt_pkgs[*]} inside the root"
    cp -L /etc/resolv.conf "$root/etc/resolv.conf"
    if ! unshare --mount --propagation private /bin/sh -c '
            set -e
            mount -t proc proc "$1/proc"
            mount --bind /dev "$1/dev"
            root=$1; shift
            chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
                DEBIAN_FRONTEND=noninteractive apt-get update -q
            chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
                DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
        ' sh "$root" "${apt_opts[@]}" "${apt_pkgs[@]}" >"$tmp/apt.log" 2>&1; then
        tail -n 40 "$tmp/apt.log" >&2
        echo "build-image.sh: apt-get install in the $suite root failed (log above)" >&2
        exit 1
    fi
    log "apt-get install done after $(( $(date +%s) - apt_start )) s ($(sed -n 's/^\([0-9]\+\) upgraded, \([0-9]\+\) newly installed.*/\2 packages/p' "$tmp/apt.log"))"
fi
# The build's dpkg and apt settings go: later installs in the root are
# ordinary ones.
rm -f "$root/$build_dpkg_cfg" "$root/$build_apt_cfg"

# Downloaded packages are not kept in the image (callers may bind a cache).
rm -f "$root"/var/cache/apt/archives/*.deb
printf 'suite=%s\npackages=%s\napt=%s\napt-options=%s\nmirror=%s\nbuilt=%s\n' "$suite" "$packages" "$apt_packages" "$apt_options" "$mirror" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$root/.image-complete"

# Replace a stale image atomically: move it aside first, then rename.
if [ -e "$image" ]; then
    mv "$image" "$tmp/stale"
fi
mv "$root" "$image"
log "built $image in $(( $(date +%s) - start )) s"
echo "$image"
