#!/bin/bash
# Builds (once) the root file system the field cluster's nodes boot from, and
# prints its path.
#
#   tests/images/build-node-image.sh [SUITE]     (default trixie, i.e. Debian 13)
#
# A node is a Debian minbase root with systemd as its init, then the cluster
# stack installed by apt inside it with the command of docs/operations.md
# ("The whole installation, command for command"): `apt-get install
# --no-install-recommends corosync pacemaker pacemaker-cli-utils pcs
# etcd-server etcd-client fence-agents-ipmilan ipmitool openssl`. Without
# `--no-install-recommends`, Debian 13's pacemaker recommends every fence
# agent there is, which brings a compiler toolchain and several hundred Python
# packages: 779 packages and 2.9 GB instead of the few the cluster runs on, and
# a build of 20 minutes instead of a few. etcd-warden itself is not in the
# image: each node installs the .deb with `dpkg -i` on its own disk. The image
# is cached by build-image.sh, keyed by the suite, both package lists and the
# apt options; a missing or stale cache is rebuilt.
set -euo pipefail
suite=${1:-trixie}
here=$(cd "$(dirname "$0")" && pwd)
# Debian 13 splits fence-agents by agent; Debian 12 ships them all in one package.
case $suite in
    bookworm) fence=fence-agents ;;
    *) fence=fence-agents-ipmilan ;;
esac
exec "$here/build-image.sh" "$suite" systemd systemd-sysv dbus iproute2 \
    --apt --no-install-recommends corosync pacemaker pacemaker-cli-utils pcs \
    etcd-server etcd-client "$fence" ipmitool openssl
