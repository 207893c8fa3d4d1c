//! The `systemd` supervision backend: both nodes get `etcd.backend =
//! "systemd"` from a drop-in in `/etc/etcd-warden/config.d/`, as an
//! operator writes it, so that each daemon starts etcd as the transient unit
//! `etcd-warden-etcd.service` through systemd's D-Bus API, from inside the
//! shipped unit's sandbox, under real systemd.
//!
//! The story, with a writer of its own on both nodes throughout whose every
//! acknowledged write is checked at the end:
//! - etcd runs as that unit on both nodes, as the `etcd` user, its log in the
//!   unit's journal;
//! - `systemctl restart etcd-warden` on node-b: the new daemon adopts the
//!   unit as it is (same main PID), no failed action;
//! - etcd crashes on node-b (`systemctl kill -s KILL` of its unit): it is
//!   started again, both nodes take writes again, nobody is fenced;
//! - node-b loses power: fenced over IPMI, the survivor takes writes, node-b
//!   is powered on, archives its old member directory, rejoins as a voter
//!   (the cycle of field_power).

use std::time::{Duration, Instant};

use warden_harness::field::{FieldCluster, FieldOptions};
use warden_harness::process;

use super::{
    assert_no_new_fence, check_writes, cluster_with, failed_actions, power_cycle, ready,
    wait_all_voters, writer,
};

/// The transient unit's name (`etcd.unit_name`'s default).
const UNIT: &str = "etcd-warden-etcd.service";

/// The drop-in that switches the backend.
pub const DROP_IN: &str = "# etcd as a transient unit of its own, started over D-Bus.\n\
                       [etcd]\nbackend = \"systemd\"\n";

/// The unit's ActiveState and MainPID on `node`.
fn unit_state(c: &FieldCluster, node: &str) -> Result<(String, u32), String> {
    let out = c
        .node_sh(
            node,
            &format!("systemctl show {UNIT} -p ActiveState -p MainPID --value"),
        )
        .map_err(|e| format!("{e:#}"))?
        .stdout;
    // `--value` prints the properties in the order systemd keeps them,
    // which is not the order asked for: tell them apart by their shape.
    let mut state = String::new();
    let mut pid = 0;
    for l in out.lines().map(str::trim) {
        match l.parse::<u32>() {
            Ok(p) => pid = p,
            Err(_) => state = l.to_owned(),
        }
    }
    Ok((state, pid))
}

/// Waits until the unit is active on `node` with a main PID other than
/// `not`, and returns that PID.
fn wait_unit_running(c: &FieldCluster, node: &str, not: u32, timeout: Duration) -> u32 {
    process::poll(
        &format!("{UNIT} active on {node} (main PID other than {not})"),
        timeout,
        Duration::from_millis(300),
        || match unit_state(c, node)? {
            (s, p) if s == "active" && p != 0 && p != not => Ok(p),
            (s, p) => Err(format!("ActiveState={s} MainPID={p}")),
        },
    )
    .unwrap()
}

/// Checks that etcd runs as the transient unit on `node`, as the etcd user,
/// logging to the unit's journal; returns its PID.
fn check_unit(c: &FieldCluster, node: &str) -> u32 {
    let pid = wait_unit_running(c, node, 0, Duration::from_secs(30));
    let user = c
        .node_sh_ok(node, &format!("ps -o user= -o comm= -p {pid}"))
        .unwrap()
        .stdout;
    assert_eq!(
        user.split_whitespace().collect::<Vec<_>>(),
        ["etcd", "etcd"],
        "{UNIT}'s main process on {node}"
    );
    // Nothing but the unit's own cgroup: etcd is not in the daemon's.
    let cgroup = c
        .node_sh_ok(node, &format!("cat /proc/{pid}/cgroup"))
        .unwrap()
        .stdout;
    assert!(
        cgroup.contains(UNIT),
        "etcd on {node} is not in its unit's cgroup: {cgroup}"
    );
    let journal = c
        .node_sh_ok(
            node,
            &format!("journalctl -u {UNIT} --no-pager -o cat | grep -c '\"level\"' || true"),
        )
        .unwrap()
        .stdout;
    assert!(
        journal.trim().parse::<u32>().unwrap_or(0) > 0,
        "no etcd log line in {UNIT}'s journal on {node}"
    );
    pid
}

/// A cluster whose nodes get the systemd backend from a drop-in before
/// their first start, on `suite`.
pub fn cluster(suite: &str) -> (FieldCluster, tempfile::TempDir) {
    let mut opts = FieldOptions::new(suite, std::path::Path::new(""));
    opts.drop_ins = vec![("50-backend.toml".into(), DROP_IN.into())];
    cluster_with(&opts).unwrap()
}

/// The story of the module's header on a cluster made by [`cluster`].
pub fn adopt_crash_power_cut(c: &FieldCluster) {
    ready(c);
    for n in ["node-a", "node-b"] {
        check_unit(c, n);
    }
    let w = writer(c, "/field-systemd").unwrap();
    let t = Instant::now();
    w.wait_ack_after(Some("node-b"), t, Duration::from_secs(30))
        .unwrap();
    let fences_before = c.crm_mon("node-a").unwrap().fence_history.len();

    // The daemon restarts; etcd's unit stays and is adopted.
    let pid = check_unit(c, "node-b");
    let restart = Instant::now();
    c.node_sh_ok("node-b", "systemctl restart etcd-warden")
        .unwrap();
    c.wait_unit_active("node-b", "etcd-warden.service", Duration::from_secs(60))
        .unwrap();
    let after = Instant::now();
    w.wait_ack_after(Some("node-b"), after, Duration::from_secs(60))
        .unwrap();
    let restarted = restart.elapsed();
    assert_eq!(
        unit_state(c, "node-b").unwrap(),
        ("active".to_owned(), pid),
        "etcd's unit on node-b after the daemon's restart"
    );
    let status = c.warden_status("node-b").unwrap();
    assert!(
        status.contains(&format!("{pid}")),
        "the restarted daemon does not report etcd's PID {pid}: {status}"
    );
    let failures = failed_actions(c, "node-a").unwrap();
    assert!(
        failures.is_empty(),
        "failed actions after the daemon's restart: {failures}"
    );

    // etcd crashes: SIGKILL of the unit's main process.
    let crash = Instant::now();
    c.node_sh_ok("node-b", &format!("systemctl kill -s KILL {UNIT}"))
        .unwrap();
    let new_pid = wait_unit_running(c, "node-b", pid, Duration::from_secs(120));
    let back = crash.elapsed();
    let ack_b = w
        .wait_ack_after(Some("node-b"), crash, Duration::from_secs(120))
        .unwrap();
    let ack_a = w
        .wait_ack_after(Some("node-a"), crash, Duration::from_secs(120))
        .unwrap();
    wait_all_voters(c, "node-a", Duration::from_secs(120)).unwrap();
    c.wait_cluster_healthy(Duration::from_secs(120)).unwrap();
    assert_no_new_fence(c, fences_before, "an etcd crash must not fence anyone");
    let failures = failed_actions(c, "node-a").unwrap();
    eprintln!("failed actions after the crash (the monitor that saw it): {failures}");
    // Pacemaker's recovery is the only restart: clear its record so that
    // the power cut below starts from a clean slate.
    c.node_sh_ok("node-a", "pcs resource cleanup").unwrap();

    // The power cut, as field_power.
    let p = power_cycle(c, &w, "node-b").unwrap();
    // After the boot, the daemon started a new transient unit.
    check_unit(c, "node-b");
    let n = check_writes(c, w, "node-a").unwrap();
    eprintln!(
        "field_systemd_backend: daemon restart -> node-b writes {:.1} s (etcd PID {pid} adopted); \
         etcd SIGKILL -> unit active again {:.1} s (PID {new_pid}), write on node-b {:.1} s, node-a {:.1} s; \
         power off -> fenced {:.1} s, node dead -> survivor write {:.1} s (fence done -> write {}), \
         power on -> voter {:.1} s; {n} acknowledged writes, all present",
        restarted.as_secs_f64(),
        back.as_secs_f64(),
        ack_b.at.duration_since(crash).as_secs_f64(),
        ack_a.at.duration_since(crash).as_secs_f64(),
        p.fenced.as_secs_f64(),
        p.crash_to_write.as_secs_f64(),
        p.fence_to_write
            .map(|d| format!("{:.2} s", d.as_secs_f64()))
            .unwrap_or_else(|| "n/a".into()),
        p.rejoin_to_voter.as_secs_f64()
    );
}
