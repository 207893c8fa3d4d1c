//! Install and first start: the unit reached `active` through
//! `Type=notify` without a restart, the journal holds the daemon's logs,
//! `etcd-warden status` answers a member of `haclient` and refuses anyone
//! else; a changed agent parameter is applied by reload-agent with etcd's
//! PIDs unchanged; a writer of its own on both nodes keeps every
//! acknowledged write.

use std::time::{Duration, Instant};

use warden_harness::field::FieldCluster;

use super::watchdog::etcd_pid;
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

        // The boot identity the daemon publishes names this boot (as
        // journald does: no dashes), although the sandbox hides /proc/sys
        // from it.
        let kernel = c
            .node_sh_ok(n, "cat /proc/sys/kernel/random/boot_id")
            .unwrap()
            .stdout
            .replace('-', "");
        let boot = c
            .node_sh_ok(n, &format!("cat /run/etcd-warden/{n}/boot-id"))
            .unwrap()
            .stdout;
        assert!(
            boot.trim().starts_with(&format!("{}/", kernel.trim()))
                && !boot.trim().ends_with("/unknown"),
            "{n}: the daemon's boot id {boot:?} does not name kernel boot {kernel:?} and a random part"
        );

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
    reload_keeps_etcd(c);
    // A steady stream for a few seconds more, then every ack checked.
    let t = Instant::now();
    w.wait_ack_after(Some("node-b"), t, Duration::from_secs(30))
        .unwrap();
    let n = check_writes(c, w, "node-a").unwrap();
    eprintln!("{label}: {n} acknowledged writes, all present");
}

/// `pcs resource update` of an agent parameter: Pacemaker applies it with
/// reload-agent (the agent declares OCF 1.1, every parameter reloadable),
/// logged as a success on both nodes, and etcd keeps its PIDs.
fn reload_keeps_etcd(c: &FieldCluster) {
    let nodes = ["node-a", "node-b"];
    let since: Vec<String> = nodes
        .iter()
        .map(|n| {
            c.node_sh_ok(n, "date +%s")
                .unwrap()
                .stdout
                .trim()
                .to_string()
        })
        .collect();
    let before: Vec<u32> = nodes.iter().map(|n| etcd_pid(c, n)).collect();
    c.node_sh_ok("node-a", "pcs resource update etcd daemon_wait=5")
        .unwrap();
    for (n, since) in nodes.iter().zip(&since) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let log = c
                .node_sh_ok(
                    n,
                    &format!("journalctl -u pacemaker --no-pager -o cat --since @{since}"),
                )
                .unwrap()
                .stdout;
            let reloads: Vec<&str> = log.lines().filter(|l| l.contains("reload")).collect();
            let done = reloads.iter().any(|l| {
                l.contains("Result of reload-agent operation for etcd")
                    && l.to_ascii_lowercase().contains(": ok")
            });
            if done {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{n}: no successful reload-agent within 120 s of the update; pacemaker's journal:\n{}",
                reloads.join("\n")
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let after: Vec<u32> = nodes.iter().map(|n| etcd_pid(c, n)).collect();
    assert_eq!(before, after, "changing daemon_wait restarted etcd");
    eprintln!("reload-agent on both nodes, etcd PIDs {after:?} unchanged");
}
