#!/bin/sh
# Installs the OCF agent and the alert wrapper under DESTDIR (default: /).
#
#   resource-agent/install.sh [DESTDIR] [AGENT_BINARY] [ETCD_WARDEN_BINARY]
#
# AGENT_BINARY defaults to target/release/etcd-warden-agent, falling back to
# target/debug/. The alert wrapper execs ETCD_WARDEN_BINARY (default
# /usr/bin/etcd-warden) with the `alert` subcommand: Pacemaker runs an
# alert's path with no arguments, so the subcommand needs a file of its own.
# Every file is written to a temporary name and renamed into place, so a
# running cluster never executes a half-written agent. `make install` and
# `make deb` (dist/install.sh) install the agent through this script too.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
destdir=${1:-}
agent=${2:-}
warden=${3:-/usr/bin/etcd-warden}

if [ -z "$agent" ]; then
    for candidate in "$top/target/release/etcd-warden-agent" "$top/target/debug/etcd-warden-agent"; do
        if [ -x "$candidate" ]; then agent=$candidate; break; fi
    done
fi
if [ -z "$agent" ] || [ ! -x "$agent" ]; then
    echo "install.sh: no agent binary; run 'cargo build -p etcd-warden-agent' or pass its path" >&2
    exit 1
fi

ocf_dir="$destdir/usr/lib/ocf/resource.d/etcd-warden"
alert_dir="$destdir/usr/libexec/etcd-warden"
install -d -m 0755 "$ocf_dir" "$alert_dir"

# The agent: 0755, as ocf-tester demands (it runs meta-data as nobody).
install -m 0755 "$agent" "$ocf_dir/.etcd.tmp.$$"
mv -f "$ocf_dir/.etcd.tmp.$$" "$ocf_dir/etcd"

tmp="$alert_dir/.alert.tmp.$$"
cat > "$tmp" <<WRAPPER
#!/bin/sh
# Pacemaker alert agent for etcd-warden (see 'etcd-warden pcs-config').
exec $warden alert "\$@"
WRAPPER
chmod 0755 "$tmp"
mv -f "$tmp" "$alert_dir/alert"

echo "installed $ocf_dir/etcd and $alert_dir/alert"
