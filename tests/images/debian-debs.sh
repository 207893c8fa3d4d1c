#!/bin/bash
# The Debian mirror the host's apt uses, and .debs of another suite fetched
# from it without touching the host's apt state.
#
#   tests/images/debian-debs.sh mirror
#       Prints the mirror: DEBIAN_MIRROR when set, else the first Debian
#       (non-security) archive of the host's apt sources (its first `deb` line
#       in /etc/apt/sources.list, or the first `URIs:` field of
#       /etc/apt/sources.list.d/*.sources). build-image.sh asks it too.
#
#   tests/images/debian-debs.sh download SUITE DIR PACKAGE...
#       Downloads the candidate .deb of each PACKAGE in SUITE (component main,
#       the host's architecture) into DIR, and prints their paths. apt runs
#       with a private configuration under DIR/.apt: its own sources list (that
#       mirror, SUITE, signed-by the Debian archive keyring), lists, cache and
#       an empty dpkg status. Of the host's apt configuration only the
#       Acquire settings are kept (proxies, date and validity checks: what the
#       host needs to reach its mirror); its hooks, sources, pins and state
#       are not used. DIR/.apt can be removed afterwards.
#
# Any failure (no mirror, no keyring, a failed index or package download)
# ends with a message on stderr and a non-zero exit.
set -euo pipefail

me=$(basename "$0")
die() { echo "$me: $*" >&2; exit 1; }
usage() {
    echo "usage: $0 mirror | $0 download SUITE DIR PACKAGE...   (e.g. $0 download sid target/debs etcd-server)" >&2
    exit 2
}

host_mirror() {
    # The first Debian (non-security) archive the host's apt is configured with.
    local m
    m=$(cat /etc/apt/sources.list 2>/dev/null | sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([a-z]\+:[^[:space:]]*\).*/\2/p' \
        | grep -v security | head -1 || true)
    if [ -z "$m" ]; then
        m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' \
            | grep -v security | head -1 || true)
    fi
    printf '%s' "$m"
}

mirror() {
    local m=${DEBIAN_MIRROR:-$(host_mirror)}
    [ -n "$m" ] || die "no Debian mirror found in the host's apt sources; set DEBIAN_MIRROR"
    printf '%s\n' "$m"
}

download() {
    [ $# -ge 3 ] || usage
    local suite=$1 dir=$2
    shift 2
    case $suite in
        ''|*/*|-*) die "bad suite name '$suite'" ;;
    esac
    local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    [ -f "$keyring" ] || die "$keyring is missing; run 'apt-get install debian-archive-keyring'"
    command -v apt-get >/dev/null || die "apt-get is missing"
    local m
    m=$(mirror)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    local apt=$dir/.apt
    mkdir -p "$apt/conf.d" "$apt/sources.list.d" "$apt/preferences.d" \
        "$apt/lists/partial" "$apt/cache/archives/partial"
    # One fetch at a time per DIR (apt's own locks would fail, not wait).
    exec 8>"$apt/fetch.lock"
    flock 8
    : >"$apt/status"
    # The host's Acquire settings, without its index targets (appstream's
    # DEP-11 metadata is of no use here).
    apt-config dump Acquire | grep -v '^Acquire::IndexTargets' >"$apt/conf.d/50host-acquire" \
        || die "apt-config dump failed"
    cat >"$apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $m
Suites: $suite
Components: main
Architectures: $(dpkg --print-architecture)
Targets: Packages
Signed-By: $keyring
EOF
    cat >"$apt/apt.conf" <<EOF
Dir::Etc::main "/dev/null";
Dir::Etc::parts "$apt/conf.d";
Dir::Etc::sourcelist "/dev/null";
Dir::Etc::sourceparts "$apt/sources.list.d";
Dir::Etc::preferences "/dev/null";
Dir::Etc::preferencesparts "$apt/preferences.d";
Dir::State "$apt";
Dir::State::lists "$apt/lists/";
Dir::State::status "$apt/status";
Dir::State::extended_states "$apt/extended_states";
Dir::Cache "$apt/cache/";
Dir::Cache::archives "$apt/cache/archives/";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Dir::Log "$apt/log";
APT::Sandbox::User "$(id -un)";
Acquire::Languages "none";
EOF
    export APT_CONFIG=$apt/apt.conf
    if ! apt-get -q update --error-on=any >"$apt/update.log" 2>&1; then
        cat "$apt/update.log" >&2
        die "apt-get update of suite $suite from $m failed (output above); set DEBIAN_MIRROR to a mirror that carries $suite"
    fi
    if ! (cd "$dir" && apt-get -q download "$@") >"$apt/download.log" 2>&1; then
        cat "$apt/download.log" >&2
        die "apt-get download $* from $suite ($m) failed (output above)"
    fi
    local p v f
    for p in "$@"; do
        v=$(apt-cache policy "$p" | sed -n 's/^  Candidate: //p')
        # apt-get download names the file PACKAGE_VERSION_ARCH.deb, the
        # epoch's colon encoded as %3a.
        f=$(ls "$dir/${p}_${v/:/%3a}_"*.deb 2>/dev/null | head -1 || true)
        [ -n "$f" ] || die "apt-get download $p reported success but left no ${p}_${v}_*.deb in $dir"
        printf '%s\n' "$f"
    done
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
    mirror) [ $# -eq 0 ] || usage; mirror ;;
    download) download "$@" ;;
    *) usage ;;
esac
