#!/bin/bash
# Builds (once) the root file system the field cluster's nodes boot from, and
# prints its path.
#
#   tests/images/build-node-image.sh [SUITE]     (default trixie, i.e. Debian 13)
#
# A node is a Debian minbase root with systemd as its init, then the cluster
# stack installed by apt inside it as an operator installs it: corosync,
# pacemaker, pcs (pcsd), etcd-server, etcd-client, the IPMI fence agent and
# OpenIPMI's tools. etcd-warden itself is not in the image: each node installs
# the .deb with `dpkg -i` on its own disk. The image is cached by
# build-image.sh, keyed by the suite and both package lists; a missing or
# stale cache is rebuilt.
set -euo pipefail
suite=${1:-trixie}
here=$(cd "$(dirname "$0")" && pwd)
# Debian 13 splits fence-agents by agent; Debian 12 ships them all in one package.
case $suite in
    bookworm) fence=fence-agents ;;
    *) fence=fence-agents-ipmilan ;;
esac
exec "$here/build-image.sh" "$suite" systemd systemd-sysv dbus iproute2 \
    --apt corosync pacemaker pcs etcd-server etcd-client "$fence" openipmi ipmitool
