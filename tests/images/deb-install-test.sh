#!/bin/bash
# Installs the etcd-warden .deb into a throwaway copy of a Debian root built
# by build-image.sh, checks what an operator gets, and removes it again.
#
#   tests/images/deb-install-test.sh IMAGE DEB
#
# IMAGE is never written: the chroot runs on an overlay whose upper layer is
# a temporary directory. Everything runs inside a private mount namespace
# (unshare --mount), so the overlay, /proc, /dev and the apt cache bind
# vanish with the namespace on every exit path, even a kill; the trap
# removes the temporary directory.
#
# `apt-get install ./DEB` pulls etcd-server, pacemaker and corosync from the
# suite's archive. Downloaded packages are kept in
# ${WARDEN_IMAGE_CACHE:-/var/cache/etcd-warden-test/images}/../apt-archives/SUITE
# so that only the first run downloads them. The image's policy-rc.d keeps
# every service (etcd's included) from starting in the chroot.
#
# Prints one "ok: ..." line per check; exits non-zero on the first failure.
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 IMAGE DEB" >&2; exit 2; }
image=$(cd "$1" && pwd)
deb=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
[ -f "$image/.image-complete" ] || { echo "deb-install-test.sh: $image is not a complete image (build it with build-image.sh)" >&2; exit 1; }
[ -f "$deb" ] || { echo "deb-install-test.sh: no package at $deb" >&2; exit 1; }

if [ -z "${WARDEN_IN_MOUNT_NS:-}" ]; then
    # Re-run this script in a private mount namespace.
    exec env WARDEN_IN_MOUNT_NS=1 unshare --mount --propagation private "$0" "$image" "$deb"
fi

suite=$(sed -n 's/^suite=//p' "$image/.image-complete")
cache=${WARDEN_IMAGE_CACHE:-/var/cache/etcd-warden-test/images}
archives=$(dirname "$cache")/apt-archives/${suite:-unknown}
mkdir -p "$archives/partial"

work=$(mktemp -d /var/tmp/etcd-warden-deb-test.XXXXXX)
cleanup() {
    # The namespace takes the mounts with it; unmount anyway so that the
    # directory can be removed while it still exists.
    umount -R "$work/root" 2>/dev/null || true
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap "exit 143" TERM INT
mkdir -p "$work/upper" "$work/work" "$work/root"
mount -t overlay overlay -o "lowerdir=$image,upperdir=$work/upper,workdir=$work/work" "$work/root"
r=$work/root
mount -t proc proc "$r/proc"
mount --bind /dev "$r/dev"
mount --bind "$archives" "$r/var/cache/apt/archives"
# Name resolution for apt inside the chroot.
cp -L /etc/resolv.conf "$r/etc/resolv.conf"
cp "$deb" "$r/tmp/"
pkg=/tmp/$(basename "$deb")

in_root() { chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# A throwaway root needs no crash safety: dpkg skips its fsyncs, and man-db
# does not rebuild its index cache after every package (man finds pages
# without it). Both only speed the install up.
echo force-unsafe-io > "$r/etc/dpkg/dpkg.cfg.d/unsafe-io"
echo 'man-db man-db/auto-update boolean false' | in_root debconf-set-selections

# The image's package lists may be older than the archive: one retry after
# apt-get update.
start=$(date +%s)
if ! in_root apt-get install -y -q --no-install-recommends "$pkg" > "$work/apt.log" 2>&1; then
    echo "deb-install-test.sh: apt-get install failed; updating the package lists and retrying" >&2
    in_root apt-get update -q > "$work/apt-update.log" 2>&1 || { cat "$work/apt-update.log" >&2; fail "apt-get update"; }
    in_root apt-get install -y -q --no-install-recommends "$pkg" > "$work/apt.log" 2>&1 \
        || { tail -n 40 "$work/apt.log" >&2; fail "apt-get install $pkg"; }
fi
ok "apt-get install ./$(basename "$deb") with its dependencies in $(( $(date +%s) - start )) s"

for dep in etcd-server pacemaker corosync etcd-warden; do
    in_root dpkg-query -W -f='${Status}' "$dep" 2>/dev/null | grep -q 'install ok installed' \
        || fail "$dep is not installed"
done
ok "etcd-server, pacemaker and corosync came in as dependencies"

in_root dpkg -L etcd-warden > "$work/files"
in_root etcd-warden --version | grep -q '^etcd-warden ' || fail "etcd-warden --version"
ok "/usr/bin/etcd-warden runs: $(in_root etcd-warden --version)"

agent=/usr/lib/ocf/resource.d/etcd-warden/etcd
[ -x "$r$agent" ] || fail "$agent is not executable"
in_root "$agent" meta-data | grep -q '<resource-agent name="etcd"' || fail "$agent meta-data"
ok "$agent is executable and prints its meta-data"
[ -x "$r/usr/libexec/etcd-warden/alert" ] || fail "the alert agent is not executable"
ok "/usr/libexec/etcd-warden/alert is executable"

# man renders the pages with warnings on; any warning is a failure.
for page in etcd-warden etcd-warden-status ocf_etcd-warden_etcd; do
    in_root env MANWIDTH=80 MAN_KEEP_STDERR=1 man --warnings -P cat "$page" > "$work/man.out" 2> "$work/man.err" \
        || { cat "$work/man.err" >&2; fail "man $page"; }
    [ ! -s "$work/man.err" ] || { cat "$work/man.err" >&2; fail "man $page printed warnings"; }
    grep -q NAME "$work/man.out" || fail "man $page rendered no NAME section"
done
grep -q 'daemon_wait' "$work/man.out" || fail "the OCF page lacks the daemon_wait parameter"
ok "man etcd-warden, etcd-warden-status and ocf_etcd-warden_etcd render without warnings"

for c in /usr/share/bash-completion/completions/etcd-warden \
         /usr/share/zsh/vendor-completions/_etcd-warden \
         /usr/share/fish/vendor_completions.d/etcd-warden.fish; do
    grep -q pcs-config "$r$c" || fail "completion $c missing or empty"
done
# The bash completion must at least parse.
in_root bash -n /usr/share/bash-completion/completions/etcd-warden || fail "the bash completion does not parse"
ok "bash, zsh and fish completions are installed"

for u in etcd-warden.service etcd-warden-collect.service etcd-warden-collect.timer \
         etcd-warden-snapshot.service etcd-warden-snapshot.timer etcd-warden-migrate-data.service; do
    [ -f "$r/usr/lib/systemd/system/$u" ] || fail "unit $u missing"
done
[ -f "$r/usr/share/doc/etcd-warden/examples/config.toml" ] || fail "example configuration missing"
[ ! -e "$r/etc/etcd-warden/config.toml" ] || fail "the package must not install a node configuration"
ok "units and the example configuration are installed"

# etcd's data, an archive and a snapshot where the daemon keeps them, owned
# as the daemon leaves them: removing and purging etcd-warden and
# etcd-server (whose postrm deletes /var/lib/etcd) must leave them all.
data_files="/var/lib/etcd-warden/data/member/snap/db /var/lib/etcd-warden/data.archive/1796036400-stale-data/member/snap/db /var/lib/etcd-warden/snapshots/etcd-warden-snapshot-node-a-20261201T120000Z.db /var/lib/etcd-warden/failover-state.json"
for f in $data_files; do
    mkdir -p "$r$(dirname "$f")"
    echo "data $f" > "$r$f"
done
in_root chown -R etcd:etcd /var/lib/etcd-warden/data

# No Pacemaker runs in the chroot: prerm does not refuse.
in_root dpkg -r etcd-warden > "$work/remove.log" 2>&1 || { cat "$work/remove.log" >&2; fail "dpkg -r etcd-warden"; }
left=0
while read -r f; do
    # Directories shared with other packages (/usr/bin, ...) stay.
    if [ -e "$r$f" ] && [ ! -d "$r$f" ]; then
        echo "left behind: $f" >&2
        left=$((left + 1))
    fi
done < "$work/files"
[ "$left" = 0 ] || fail "dpkg -r left $left files"
in_root dpkg-query -W -f='${Status}' etcd-warden 2>/dev/null | grep -q 'install ok installed' \
    && fail "etcd-warden still installed after dpkg -r"
ok "dpkg -r etcd-warden removed all $(wc -l < "$work/files") paths it had installed"

in_root dpkg --purge etcd-warden > "$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; fail "dpkg --purge etcd-warden"; }
in_root dpkg --purge etcd-server > "$work/purge-etcd.log" 2>&1 || { cat "$work/purge-etcd.log" >&2; fail "dpkg --purge etcd-server"; }
[ ! -e "$r/var/lib/etcd" ] || fail "etcd-server's purge left /var/lib/etcd (this check no longer shows its rm -rf)"
for f in $data_files; do
    [ "$(cat "$r$f" 2>/dev/null)" = "data $f" ] || fail "$f is gone or changed after purging etcd-warden and etcd-server"
done
ok "etcd's data, archive, snapshot and state file survive purging etcd-warden and etcd-server"
