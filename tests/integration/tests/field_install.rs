//! Field nodes (systemd as PID 1, the .deb, real pcs, IPMI fencing):
//! install and first start. The unit reaches `active` through
//! `Type=notify`, the journal holds the daemon's logs, `etcd-warden status`
//! answers a member of `haclient` and refuses anyone else, and a writer on
//! both nodes keeps every acknowledged write.
//!
//! Heavy (two booted Debian nodes): run under `flock /tmp/warden-field.lock`
//! (its own lock: field nodes share no host path, port or namespace name
//! with the namespace cluster tests).

#![allow(clippy::unwrap_used)]

mod field_support;

use std::time::Duration;

#[test]
fn field_install_first_start_journal_and_socket_access() {
    let (c, _work) = field_support::cluster().unwrap();
    let w = field_support::writer(&c, "/field-install").unwrap();
    field_support::wait_all_voters(&c, "node-a", Duration::from_secs(60)).unwrap();

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
        assert!(
            ok.success(),
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
    let t = std::time::Instant::now();
    w.wait_ack_after(Some("node-b"), t, Duration::from_secs(30))
        .unwrap();
    let n = field_support::check_writes(&c, w, "node-a").unwrap();
    eprintln!("field_install: {n} acknowledged writes, all present");
}
