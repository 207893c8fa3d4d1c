#!/bin/bash
# Builds, once, a local apt repository holding every .deb a field node of
# FROM_SUITE needs for `apt-get full-upgrade` to TO_SUITE, and prints its path.
#
#   tests/images/build-upgrade-repo.sh FROM_SUITE TO_SUITE   (e.g. bookworm trixie)
#
# A field node reaches no network but its harness's; its release upgrade reads
# this repository instead of a mirror (`deb [trusted=yes] file:DIR ./`). The
# set of packages is what apt itself resolves: a copy of the FROM_SUITE node
# image (tests/images/build-node-image.sh) gets TO_SUITE's sources from the
# host's mirror (debian-debs.sh mirror, signed by the host's Debian archive
# keyring) and runs `apt-get --download-only full-upgrade` in a chroot; the
# .debs it fetched and their `Packages` index (dpkg-scanpackages) are the
# repository. The copy is thrown away.
#
# Cached under ${WARDEN_IMAGE_CACHE:-/var/cache/etcd-warden-test/images}/../repos/<key>,
# where <key> hashes both suites, the node image's directory (itself keyed by
# what it holds) and this script's layout version; rebuilt when older than
# WARDEN_IMAGE_MAX_AGE_DAYS (default 30), never an error. Built in a temporary
# directory and renamed into place when complete. Progress goes to stderr;
# stdout carries only the path.
set -euo pipefail

LAYOUT_VERSION=1
me=$(basename "$0")
here=$(cd "$(dirname "$0")" && pwd)
log() { echo "$me: $*" >&2; }
die() { echo "$me: $*" >&2; exit 1; }

[ $# -eq 2 ] || { echo "usage: $0 FROM_SUITE TO_SUITE   (e.g. $0 bookworm trixie)" >&2; exit 2; }
from=$1 to=$2
for s in "$from" "$to"; do
    case $s in ''|*/*|-*) die "bad suite name '$s'" ;; esac
done
[ "$(id -u)" = 0 ] || die "needs root (chroot)"
command -v dpkg-scanpackages >/dev/null || die "dpkg-scanpackages is missing; run 'apt-get install dpkg-dev' (or 'make deps')"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$keyring" ] || die "$keyring is missing; run 'apt-get install debian-archive-keyring'"

image=$("$here/build-node-image.sh" "$from")
images=${WARDEN_IMAGE_CACHE:-/var/cache/etcd-warden-test/images}
cache=$(dirname "$images")/repos
max_age_days=${WARDEN_IMAGE_MAX_AGE_DAYS:-30}
key=$(printf 'layout=%s\nfrom=%s\nto=%s\nimage=%s\n' "$LAYOUT_VERSION" "$from" "$to" "$(basename "$image")" \
    | sha256sum | cut -c1-16)
repo=$cache/$key
marker=$repo/.repo-complete

mkdir -p "$cache"
exec 9>"$cache/.lock-$key"
flock 9
if [ -f "$marker" ] && [ -z "$(find "$marker" -mtime "+$max_age_days" 2>/dev/null)" ]; then
    log "cached: $repo ($from -> $to, $(grep -c '^Package:' "$repo/Packages") packages)"
    echo "$repo"
    exit 0
fi

mirror=$("$here/debian-debs.sh" mirror)
tmp=$(mktemp -d "$cache/.build-$key.XXXXXX")
trap 'rm -rf --one-file-system "$tmp"' EXIT
trap 'exit 143' TERM INT
start=$(date +%s)
log "resolving a $from -> $to full-upgrade of $image against $mirror; this takes a few minutes once"
cp -a --reflink=auto "$image" "$tmp/root"
root=$tmp/root
rm -f "$root/etc/apt/sources.list" "$root"/etc/apt/sources.list.d/*
install -m 0644 "$keyring" "$root/etc/apt/upgrade-archive-keyring.gpg"
echo "deb [signed-by=/etc/apt/upgrade-archive-keyring.gpg] $mirror $to main" > "$root/etc/apt/sources.list"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
if ! unshare --mount --propagation private /bin/sh -c '
        set -e
        mount -t proc proc "$1/proc"
        mount --bind /dev "$1/dev"
        root=$1
        run() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
            DEBIAN_FRONTEND=noninteractive "$@"; }
        run apt-get -q update
        run apt-get -q -y --download-only -o Acquire::Languages=none full-upgrade
    ' sh "$root" >"$tmp/apt.log" 2>&1; then
    tail -n 40 "$tmp/apt.log" >&2
    die "resolving the $from -> $to upgrade failed (log above)"
fi
mkdir "$tmp/repo"
find "$root/var/cache/apt/archives" -maxdepth 1 -name '*.deb' -exec mv -t "$tmp/repo" {} +
n=$(find "$tmp/repo" -maxdepth 1 -name '*.deb' | wc -l)
[ "$n" -gt 0 ] || die "apt resolved no package to download for $from -> $to (log: $(tail -n 5 "$tmp/apt.log"))"
(cd "$tmp/repo" && dpkg-scanpackages --multiversion . /dev/null > Packages 2>"$tmp/scan.log") \
    || { cat "$tmp/scan.log" >&2; die "dpkg-scanpackages failed"; }
printf 'from=%s\nto=%s\nimage=%s\nmirror=%s\npackages=%s\nbuilt=%s\n' "$from" "$to" "$image" "$mirror" "$n" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$tmp/repo/.repo-complete"
if [ -e "$repo" ]; then
    mv "$repo" "$tmp/stale"
fi
mv "$tmp/repo" "$repo"
log "built $repo ($n packages, $(du -sh "$repo" | cut -f1)) in $(( $(date +%s) - start )) s"
echo "$repo"
