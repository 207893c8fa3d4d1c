#!/bin/bash
# Removes what dist/install.sh (`make install`) installed, as its manifest
# lists it: the files, then the directories that install created, when empty.
#
#   DESTDIR=/ PREFIX=/usr dist/uninstall.sh
#
# DESTDIR and PREFIX must be the ones given to the install. Files the manifest
# does not list (an operator's /etc/etcd-warden/config.toml, etcd's data) are
# never touched, and a directory is only removed when it is empty.
set -euo pipefail

destdir=${DESTDIR:-}
prefix=${PREFIX:-/usr}
prefix=${prefix%/}
manifest=$destdir$prefix/share/etcd-warden/install-manifest

die() { echo "uninstall.sh: $*" >&2; exit 1; }

[ -f "$manifest" ] || die "no install manifest at $manifest; was etcd-warden installed with 'make install DESTDIR=$destdir PREFIX=$prefix'? (a .deb is removed with 'dpkg -r etcd-warden')"

# Every entry must be an absolute path without '..': the manifest is data,
# and a damaged one must not steer rm outside DESTDIR.
bad=$(grep -v '^#' "$manifest" | grep -v -E '^(file|dir) /' || true)
bad+=$(grep -E '(^|/)\.\.(/|$)' "$manifest" || true)
[ -z "$bad" ] || die "refusing a damaged manifest $manifest: $bad"

dirs=$(sed -n 's/^dir //p' "$manifest" | awk '{ print length($0) "\t" $0 }' | sort -rn | cut -f2-)
removed=0
while read -r kind path; do
    [ "$kind" = file ] || continue
    if [ -e "$destdir$path" ] || [ -L "$destdir$path" ]; then
        rm -f "$destdir$path"
        removed=$((removed + 1))
    fi
done < "$manifest"
rm -f "$manifest"

# Innermost directories first (longest path first); one still holding
# anything stays, and is named.
kept=()
while read -r d; do
    [ -n "$d" ] && [ -d "$destdir$d" ] || continue
    rmdir "$destdir$d" 2>/dev/null || kept+=("$destdir$d")
done <<< "$dirs"
echo "uninstall.sh: removed $removed files"
if [ ${#kept[@]} -gt 0 ]; then
    echo "uninstall.sh: kept directories that are not empty: ${kept[*]}"
fi
