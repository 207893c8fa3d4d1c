#!/bin/bash
# Builds the etcd-warden .deb from already built binaries and prints its path.
#
#   dist/build-deb.sh BINDIR OUTDIR
#
# The package tree is exactly what `make install` writes (dist/install.sh into
# a staging root, binaries stripped), plus the Debian metadata: control with
# the shared-library dependencies dpkg-shlibdeps computes, md5sums, the
# maintainer scripts in dist/debian/ and a changelog. `dpkg-deb
# --root-owner-group` makes every file root's without fakeroot. See
# docs/packaging.md for why this is a plain staging tree and not cargo-deb.
#
# Environment: MAINTAINER overrides the Maintainer field; SOURCE_DATE_EPOCH
# (default: the last commit's time) dates the changelog, so two builds of the
# same commit give the same metadata.
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 BINDIR OUTDIR" >&2; exit 2; }
bindir=$(cd "$1" && pwd)
outdir=$2
top=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "build-deb.sh: $*" >&2; exit 1; }
for tool in dpkg-deb dpkg-shlibdeps strip gzip; do
    command -v "$tool" >/dev/null || die "$tool is missing (apt-get install dpkg-dev binutils)"
done

# The version is the workspace's ([workspace.package] version in Cargo.toml).
version=$(sed -n '/^\[workspace\.package\]/,/^\[/s/^version *= *"\([^"]*\)".*/\1/p' "$top/Cargo.toml")
[ -n "$version" ] || die "no [workspace.package] version in $top/Cargo.toml"
arch=$(dpkg --print-architecture)
maintainer=${MAINTAINER:-etcd-warden maintainers <maintainers@etcd-warden.example>}
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$top" log -1 --format=%ct 2>/dev/null || date +%s)}

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
mkdir -p "$root"
chmod 0755 "$root"

SOURCE_DATE_EPOCH=$epoch DESTDIR=$root PREFIX=/usr BINDIR=$bindir STRIP=1 MANIFEST=0 \
    "$top/dist/install.sh" >&2

# A native package's changelog (Debian Policy 12.7), compressed as dh does.
doc=$root/usr/share/doc/etcd-warden
{
    echo "etcd-warden ($version) unstable; urgency=medium"
    echo
    echo "  * Package built from the etcd-warden source tree at version $version."
    echo "    The project's history is its git log."
    echo
    echo " -- $maintainer  $(LC_ALL=C date -u -R -d "@$epoch")"
} | gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"

# Shared-library dependencies of the two ELF binaries, as dh_shlibdeps would
# compute them. dpkg-shlibdeps wants a debian/control beside it.
mkdir -p "$stage/src/debian"
printf 'Source: etcd-warden\n\nPackage: etcd-warden\nArchitecture: any\n' > "$stage/src/debian/control"
shlibs=$(cd "$stage/src" && dpkg-shlibdeps -O \
    "$root/usr/bin/etcd-warden" "$root/usr/lib/ocf/resource.d/etcd-warden/etcd" 2>"$stage/shlibdeps.err" \
    | sed -n 's/^shlibs:Depends=//p') \
    || { cat "$stage/shlibdeps.err" >&2; die "dpkg-shlibdeps failed"; }
[ -n "$shlibs" ] || die "dpkg-shlibdeps found no shared-library dependencies"

mkdir -p "$root/DEBIAN"
installed_kb=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<EOF
Package: etcd-warden
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_kb
Depends: $shlibs, etcd-server, pacemaker, pacemaker-cli-utils, corosync, procps
Recommends: etcd-client
Suggests: pcs | crmsh
Section: admin
Priority: optional
Description: keeps etcd available and safe on Pacemaker clusters
 etcd-warden runs etcd under Pacemaker, above all on two-node clusters with
 fencing: a host daemon supervises etcd, checks quorum live and, once
 Pacemaker has fenced a lost peer, lets the survivor continue alone and the
 fenced node rejoin with its stale data archived, never deleted.
 .
 The package contains the daemon and its command-line interface, the OCF
 resource agent ocf:etcd-warden:etcd, the Pacemaker alert agent, systemd
 units, man pages and shell completions. Installing it starts nothing:
 Pacemaker decides where etcd runs.
EOF
for s in postinst prerm postrm; do
    install -m 0755 "$top/dist/debian/$s" "$root/DEBIAN/$s"
done
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z \
    | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"

mkdir -p "$outdir"
deb="$outdir/etcd-warden_${version}_${arch}.deb"
SOURCE_DATE_EPOCH=$epoch dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "build-deb.sh: built $deb ($(du -h "$deb" | cut -f1))" >&2
echo "$deb"
