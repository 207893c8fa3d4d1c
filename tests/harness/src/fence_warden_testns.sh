#!/bin/bash
# fence_warden_testns -- fence agent for warden-harness namespace test clusters.
# Installed by the harness as /usr/sbin/fence_warden_testns (pacemaker-fenced
# only looks for agents in /usr/sbin); identical for every cluster, because
# which cluster a request is for comes from the stonith resource's instance
# attribute harness_root=<cluster temp dir>, which fenced passes on stdin.
#
# A test makes one node's fencing fail (as with an unreachable BMC) by
# creating <harness_root>/<node>/fence-fails (see fence_agent::set_fails).
#
# Protocol: key=value lines on stdin (action=, plug=/port=/nodename=, plus the
# device's instance attributes); exit 0 = success, status: 0 = on, 2 = off.
#
# "Power off" node X = SIGKILL every process in X's mount namespace (taken
# from the holder process recorded in <harness_root>/<X>/holder.pid) except
# the holder itself, which keeps the namespaces alive. "on" does nothing: the
# harness restarts Corosync and Pacemaker itself (Cluster::power_on).
set -u
action=${1:-}; plug=""; root=""
# Read stdin directly (no process substitution: its helper process would be
# left unreaped when the agent exits).
if [ ! -t 0 ]; then
  while IFS='=' read -r k v; do
    case "$k" in
      action|option) action=$v ;;
      plug|port|nodename) plug=$v ;;
      harness_root) root=$v ;;
    esac
  done
fi

log() { [ -n "$root" ] && [ -d "$root" ] && echo "$(date +%T.%N) pid=$$ action=$action plug=$plug $*" >> "$root/fence.log"; }

metadata() {
  cat <<'EOF'
<?xml version="1.0" ?>
<resource-agent name="fence_warden_testns" shortdesc="Fence agent for warden-harness namespace test nodes">
<longdesc>Powers off a warden-harness test node by killing every process in its mount namespace. For tests only.</longdesc>
<parameters>
  <parameter name="harness_root" unique="0" required="1">
    <getopt mixed="--harness-root=[dir]" />
    <content type="string" />
    <shortdesc lang="en">Temp dir of the test cluster (holds NODE/holder.pid)</shortdesc>
  </parameter>
  <parameter name="plug" unique="0" required="0">
    <getopt mixed="-n, --plug=[id]" />
    <content type="string" />
    <shortdesc lang="en">Node to fence</shortdesc>
  </parameter>
</parameters>
<actions>
  <action name="on" automatic="0"/>
  <action name="off" />
  <action name="reboot" />
  <action name="status" />
  <action name="list" />
  <action name="monitor" />
  <action name="metadata" />
</actions>
</resource-agent>
EOF
}

# The victim's holder PID and mount namespace, after checks that make sure we
# never kill anything outside a harness test node.
victim_ns() {
  local hp ns
  [ -f "$root/.warden-harness" ] || { echo "no harness marker in '$root'" >&2; return 1; }
  [ -n "$plug" ] && [ -f "$root/$plug/holder.pid" ] || { echo "unknown node '$plug'" >&2; return 1; }
  hp=$(cat "$root/$plug/holder.pid")
  ns=$(readlink "/proc/$hp/ns/mnt") || { echo "holder $hp of $plug is gone" >&2; return 1; }
  # The host's own mount namespace must never be "fenced".
  [ "$ns" != "$(readlink /proc/1/ns/mnt)" ] || { echo "holder $hp is in the host namespace" >&2; return 1; }
  echo "$hp $ns"
}

victim_procs() { # pids in the victim's mount namespace, minus the holder
  local hp=$1 ns=$2 pat f p
  # One find over every process instead of a readlink each (a sweep cost
  # 0.1-0.3 s that way, and a fence sweeps at least twice); the brackets of
  # "mnt:[inode]" are escaped for -lname.
  pat=$(printf '%s' "$ns" | sed 's/[][*?\\]/\\&/g')
  find /proc/[0-9]*/ns/mnt -maxdepth 0 -lname "$pat" 2>/dev/null | while read -r f; do
    p=${f#/proc/}
    p=${p%%/*}
    [ "$p" = "$hp" ] && continue
    # zombies are already dead
    [ "$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$p/stat" 2>/dev/null)" = Z ] && continue
    echo "$p"
  done
}

case "$action" in
  metadata) metadata; exit 0 ;;
  monitor)
    [ -f "$root/.warden-harness" ] && exit 0
    log "monitor: no harness marker"; exit 1 ;;
  list)
    for d in "$root"/*/holder.pid; do [ -e "$d" ] && basename "$(dirname "$d")"; done
    exit 0 ;;
  status)
    v=$(victim_ns) || { log "status failed"; exit 1; }
    set -- $v
    if [ -n "$(victim_procs "$1" "$2")" ]; then exit 0; else exit 2; fi ;;
  on) log "on: left to the harness"; exit 0 ;;
  off|reboot)
    # A test makes this node's fencing fail (an unreachable BMC) with the
    # switch file <harness_root>/<node>/fence-fails.
    if [ -n "$plug" ] && [ -f "$root/$plug/fence-fails" ]; then
      log "failed on purpose: $root/$plug/fence-fails exists"
      exit 1
    fi
    v=$(victim_ns 2>&1) || { log "refused: $v"; exit 1; }
    set -- $v
    # A process forked while the sweep ran is in no list yet and would
    # outlive a single sweep, as nothing outlives a power cut: sweep until
    # the namespace is empty, for at most 10 s (killed processes take a
    # moment to leave /proc; zombies do not count).
    killed=""
    end=$(( $(date +%s) + 10 ))
    while pids=$(victim_procs "$1" "$2"); [ -n "$pids" ]; do
      if [ "$(date +%s)" -ge "$end" ]; then
        log "processes keep appearing after 10 s: $(echo $pids)"
        exit 1
      fi
      kill -KILL $pids 2>/dev/null
      killed="$killed $pids"
      sleep 0.01
    done
    log "killed:$(echo " $killed" | tr -s ' ')"
    exit 0 ;;
  *) log "unknown action"; exit 1 ;;
esac
