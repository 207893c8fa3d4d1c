#!/bin/bash
# Installs etcd-warden from already built binaries: the tree `make install`
# and `make deb` produce. It never runs cargo or apt.
#
#   DESTDIR=/ PREFIX=/usr BINDIR=target/release dist/install.sh
#
# Environment:
#   BINDIR    directory holding etcd-warden and etcd-warden-agent (required)
#   DESTDIR   staging root (default: empty, the running system)
#   PREFIX    /usr (default) or e.g. /usr/local; see "Paths" below
#   STRIP     1: strip the binaries (the package does, as Debian packages do)
#   MANIFEST  1 (default): record every file and created directory in
#             $PREFIX/share/etcd-warden/install-manifest for dist/uninstall.sh;
#             0 for the package, where dpkg keeps that list itself
#
# Paths. PREFIX moves what is found through a search path: the binary (PATH),
# the man pages (manpath), completions, documentation and the systemd units
# (systemd also reads /usr/local/lib/systemd/system; their ExecStart is
# rewritten to PREFIX/bin). Paths that are fixed elsewhere do not move:
#   /usr/lib/ocf/resource.d/etcd-warden/etcd   Pacemaker's OCF root
#   /usr/libexec/etcd-warden/alert             the alert path pcs-config prints
#   /usr/lib/etcd-warden/config.d/             the defaults the daemon reads
# /etc/etcd-warden is created for the operator's configuration; no file is
# installed there (each node's configuration differs, see the example).
#
# Progress goes to stdout, one line a group of files.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
destdir=${DESTDIR:-}
prefix=${PREFIX:-/usr}
bindir=${BINDIR:-}
strip=${STRIP:-0}
manifest=${MANIFEST:-1}

die() { echo "install.sh: $*" >&2; exit 1; }

case $prefix in
    /*) ;;
    *) die "PREFIX must be an absolute path, not '$prefix'" ;;
esac
prefix=${prefix%/}
[ -n "$prefix" ] || die "PREFIX must not be /; use /usr or /usr/local"
[ -n "$bindir" ] || die "BINDIR is not set (the directory holding etcd-warden and etcd-warden-agent)"
for b in etcd-warden etcd-warden-agent; do
    if [ ! -x "$bindir/$b" ]; then
        die "$bindir/$b is missing; build it with 'make release' (cargo build --release -p etcd-warden -p etcd-warden-agent) or set BINDIR= to a directory holding it"
    fi
done
warden_src=$bindir/etcd-warden
agent_src=$bindir/etcd-warden-agent

ocf_dir=/usr/lib/ocf/resource.d/etcd-warden
libexec_dir=/usr/libexec/etcd-warden
defaults_dir=/usr/lib/etcd-warden/config.d
unit_dir=$prefix/lib/systemd/system
doc_dir=$prefix/share/doc/etcd-warden
man_dir=$prefix/share/man
manifest_file=$prefix/share/etcd-warden/install-manifest

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
files="$work/files"
dirs="$work/dirs"
: > "$files"
: > "$dirs"

# Creates DIR (a path without DESTDIR) and its missing parents, recording the
# ones this run created, outermost first.
mkdirs() {
    local d=$1 missing=()
    while [ -n "$d" ] && [ "$d" != / ] && [ ! -d "$destdir$d" ]; do
        missing=("$d" "${missing[@]}")
        d=$(dirname "$d")
    done
    for d in "${missing[@]}"; do
        install -d -m 0755 "$destdir$d"
        echo "$d" >> "$dirs"
    done
}

# put MODE SRC DEST: installs one file (DEST without DESTDIR) through a
# temporary name and a rename, so a running system never sees half a file.
put() {
    local mode=$1 src=$2 dest=$3
    mkdirs "$(dirname "$dest")"
    local tmp
    tmp="$destdir$(dirname "$dest")/.$(basename "$dest").tmp.$$"
    install -m "$mode" "$src" "$tmp"
    mv -f "$tmp" "$destdir$dest"
    echo "$dest" >> "$files"
}

# The binaries, stripped for the package (dh_strip's options).
stage_bin() {
    local src=$1 name=$2
    cp "$src" "$work/$name"
    if [ "$strip" = 1 ]; then
        strip --strip-unneeded --remove-section=.comment --remove-section=.note "$work/$name"
    fi
    echo "$work/$name"
}
warden=$(stage_bin "$warden_src" etcd-warden)
agent=$(stage_bin "$agent_src" etcd-warden-agent)

echo "install.sh: binaries into $destdir$prefix/bin and $destdir$ocf_dir"
put 0755 "$warden" "$prefix/bin/etcd-warden"
# The OCF agent and the alert wrapper: resource-agent/install.sh writes them
# (the same script the cluster tests use), into a scratch root first so that
# every file goes through put() and the manifest.
"$top/resource-agent/install.sh" "$work/ra" "$agent" "$prefix/bin/etcd-warden" >/dev/null
put 0755 "$work/ra$ocf_dir/etcd" "$ocf_dir/etcd"
put 0755 "$work/ra$libexec_dir/alert" "$libexec_dir/alert"

echo "install.sh: systemd units into $destdir$unit_dir"
for u in "$top"/systemd/*.service "$top"/systemd/*.timer; do
    [ -e "$u" ] || continue
    sed -e "s|/usr/bin/etcd-warden|$prefix/bin/etcd-warden|g" \
        -e "s|file:/usr/share/doc/etcd-warden|file:$doc_dir|g" "$u" > "$work/$(basename "$u")"
    put 0644 "$work/$(basename "$u")" "$unit_dir/$(basename "$u")"
done

defaults=$top/daemon/config/00-defaults.toml
if [ -e "$defaults" ]; then
    echo "install.sh: default configuration into $destdir$defaults_dir"
    put 0644 "$defaults" "$defaults_dir/00-defaults.toml"
fi
mkdirs /etc/etcd-warden

echo "install.sh: man pages into $destdir$man_dir"
"$warden" generate man "$work/man" >/dev/null
"$agent" meta-data > "$work/meta-data.xml"
"$warden" generate ocf-man --metadata "$work/meta-data.xml" "$work/man" >/dev/null
for page in "$work"/man/*.[78]; do
    section=${page##*.}
    gzip -9n < "$page" > "$page.gz"
    put 0644 "$page.gz" "$man_dir/man$section/$(basename "$page").gz"
done

echo "install.sh: bash, zsh and fish completions into $destdir$prefix/share"
"$warden" generate completions "$work/completions" >/dev/null
put 0644 "$work/completions/etcd-warden.bash" "$prefix/share/bash-completion/completions/etcd-warden"
put 0644 "$work/completions/_etcd-warden" "$prefix/share/zsh/vendor-completions/_etcd-warden"
put 0644 "$work/completions/etcd-warden.fish" "$prefix/share/fish/vendor_completions.d/etcd-warden.fish"

echo "install.sh: documentation and the example configuration into $destdir$doc_dir"
put 0644 "$top/dist/copyright" "$doc_dir/copyright"
put 0644 "$top/README.md" "$doc_dir/README.md"
for d in "$top"/docs/*.md; do
    put 0644 "$d" "$doc_dir/$(basename "$d")"
done
put 0644 "$top/systemd/crontab.example" "$doc_dir/examples/crontab"
put 0644 "$top/dist/config.toml" "$doc_dir/examples/config.toml"

if [ "$manifest" = 1 ]; then
    # Directories an earlier install created stay recorded.
    if [ -f "$destdir$manifest_file" ]; then
        sed -n 's/^dir //p' "$destdir$manifest_file" >> "$dirs"
    fi
    mkdirs "$(dirname "$manifest_file")"
    {
        echo "# etcd-warden install manifest: what dist/uninstall.sh removes"
        echo "# (paths without DESTDIR; 'dir' lines are directories this install created)"
        sort -u "$files" | sed 's/^/file /'
        awk '!seen[$0]++' "$dirs" | sed 's/^/dir /'
    } > "$work/manifest"
    install -m 0644 "$work/manifest" "$destdir$manifest_file"
    echo "install.sh: $(sort -u "$files" | wc -l) files installed; manifest $destdir$manifest_file"
else
    echo "install.sh: $(sort -u "$files" | wc -l) files installed"
fi
