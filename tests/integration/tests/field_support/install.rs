//! Install and first start: the unit reached `active` through
//! `Type=notify` without a restart, the journal holds the daemon's logs,
//! `etcd-warden status` answers a member of `haclient` and refuses anyone
//! else; a writer of its own on both nodes keeps every acknowledged write.

use std::time::{Duration, Instant};

use warden_harness::field::FieldCluster;

use super::{check_writes, ready, writer};

/// Runs the checks on a cluster fresh from its setup (no restart of the
/// daemon yet: `NRestarts=0`).
pub fn install(c: &FieldCluster, label: &str) {
    ready(c);
    let w = writer(c, "/field-install").unwrap();
    for n in ["node-a", "node-b"] {
        let show = c
            .node_sh_ok(
                n,
                "systemctl show etcd-warden -p Type -p ActiveState -p SubState -p NRestarts",
            )
            .unwrap()
            .stdout;
        assert!(show.contains("Type=notify"), "{n}: {show}");
        assert!(show.contains("ActiveState=active"), "{n}: {show}");
        assert!(show.contains("NRestarts=0"), "{n}: {show}");

        let journal = c
            .node_sh_ok(n, "journalctl -u etcd-warden --no-pager -o cat")
            .unwrap()
            .stdout;
        assert!(
            journal.lines().filter(|l| !l.trim().is_empty()).count() >= 3,
            "{n}: journalctl -u etcd-warden shows too little:\n{journal}"
        );

        // hacluster is a member of haclient (and in api.allowed_users).
        let ok = c
            .node_sh(
                n,
                "id -nG hacluster && runuser -u hacluster -- etcd-warden status",
            )
            .unwrap();
        // Served: the status, healthy (0) or not (2) as etcd may not run yet.
        assert!(
            ok.status
                .code()
                .is_some_and(|c| warden_harness::process::STATUS_ANSWERED.contains(&c)),
            "{n}: status as hacluster: {}{}",
            ok.stdout,
            ok.stderr
        );
        assert!(ok.stdout.contains("haclient"), "{n}: {}", ok.stdout);

        let refused = c
            .node_sh(
                n,
                "id outsider >/dev/null 2>&1 || useradd --no-create-home outsider; runuser -u outsider -- etcd-warden status",
            )
            .unwrap();
        assert!(
            !refused.success(),
            "{n}: etcd-warden status must be refused to a user outside haclient: {}",
            refused.stdout
        );
        eprintln!("{n}: outsider refused: {}", refused.stderr.trim());
    }
    // A steady stream for a few seconds more, then every ack checked.
    let t = Instant::now();
    w.wait_ack_after(Some("node-b"), t, Duration::from_secs(30))
        .unwrap();
    let n = check_writes(c, w, "node-a").unwrap();
    eprintln!("{label}: {n} acknowledged writes, all present");
}
