//! `systemctl reload etcd-warden` after a configuration change on a live
//! pair: the daemon applies the defragmentation policy, names the timeout
//! that needs a restart, and keeps its PID and etcd's; a broken file fails
//! the reload and changes nothing. Then `systemctl restart etcd-warden`,
//! and the same after a configuration typo. The restart leaves etcd running (same PID) and the
//! new daemon adopts it; the typo makes the new daemon exit 78, which
//! systemd does not restart (`RestartPreventExitStatus=78`): etcd keeps
//! serving without its daemon (the OCF agent judges it itself), nobody is
//! fenced, no action fails, and `etcd-warden status` names the file and
//! the key. Once the typo is removed, a restart adopts the same etcd again.
//! A writer on both nodes runs throughout; every acknowledged write is
//! checked.

use std::time::{Duration, Instant};

use warden_harness::field::FieldCluster;
use warden_integration::writer::longest_gap;

use super::watchdog::{etcd_pid, main_pid};
use super::{assert_no_failed_action, assert_no_new_fence, begin, check_writes, wait_all_voters};

/// The longest write gap a daemon restart may cause (issue bound for a
/// restart that leaves etcd running).
const RESTART_GAP: Duration = Duration::from_secs(2);
/// How long etcd serves without its daemon in the scenario: three of the
/// agent's 10 s monitors.
const DAEMON_DOWN: Duration = Duration::from_secs(35);
const NODE: &str = "node-b";
const TYPO: &str = "/etc/etcd-warden/config.d/99-field-typo.toml";
const EDIT: &str = "/etc/etcd-warden/config.d/50-field-reload.toml";

/// Whether `pid` runs on `node`.
fn runs(c: &FieldCluster, node: &str, pid: u32) -> bool {
    c.node_sh(node, &format!("kill -0 {pid}"))
        .is_ok_and(|o| o.success())
}

/// `systemctl restart etcd-warden` on [`NODE`], then waits until the new
/// daemon reports the etcd with PID `etcd`.
fn restart_adopting(c: &FieldCluster, etcd: u32) {
    c.node_sh_ok(NODE, "systemctl restart etcd-warden").unwrap();
    warden_harness::process::poll(
        "the restarted daemon to report the adopted etcd",
        Duration::from_secs(60),
        Duration::from_millis(300),
        || {
            let out = c
                .node_sh(NODE, "etcd-warden status --json")
                .map_err(|e| format!("{e:#}"))?;
            let v: serde_json::Value =
                serde_json::from_str(&out.stdout).map_err(|e| format!("{e}: {}", out.stdout))?;
            match v.get("etcdPid").and_then(serde_json::Value::as_u64) {
                Some(p) if p == u64::from(etcd) => Ok(()),
                other => Err(format!("etcdPid {other:?}")),
            }
        },
    )
    .unwrap();
}

/// Writes `text` to [`EDIT`] on [`NODE`] and runs `systemctl reload
/// etcd-warden`; its outcome.
fn edit_and_reload(c: &FieldCluster, text: &str) -> warden_harness::process::CmdOutput {
    c.node_sh_ok(
        NODE,
        &format!("mkdir -p /etc/etcd-warden/config.d && printf '{text}' > {EDIT}"),
    )
    .unwrap();
    c.node_sh(NODE, "systemctl reload etcd-warden").unwrap()
}

/// `etcd-warden reload --json` on [`NODE`].
fn reload_json(c: &FieldCluster) -> serde_json::Value {
    let out = c.node_sh_ok(NODE, "etcd-warden reload --json").unwrap();
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

/// The reload scenario; the longest write gap on each node across it.
fn reload(c: &FieldCluster, w: &warden_integration::writer::Writer, etcd: u32) -> Vec<Duration> {
    let (daemon, _) = main_pid(c, NODE).unwrap();
    let t0 = Instant::now();
    let done = edit_and_reload(
        c,
        "[defrag]\\nfragmentation_percent = 60\\n[timeouts]\\nhung_after_ms = 6000\\n",
    );
    assert!(
        done.success(),
        "systemctl reload: {}{}",
        done.stdout,
        done.stderr
    );
    // Applied: asked again, the daemon runs with the new policy already,
    // and still names the timeout that waits for a restart.
    let again = reload_json(c);
    assert_eq!(again["applied"], serde_json::json!([]), "{again}");
    assert_eq!(
        again["atDaemonRestart"],
        serde_json::json!(["timeouts.hung_after_ms"]),
        "{again}"
    );
    // A broken file: the reload fails, the daemon runs on unchanged.
    let failed = edit_and_reload(c, "[defrag]\\nenabled = \"yes\"\\n");
    assert!(
        !failed.success(),
        "systemctl reload succeeded with a broken file"
    );
    let journal = c
        .node_sh_ok(NODE, "journalctl -u etcd-warden -n 30 --no-pager")
        .unwrap()
        .stdout;
    assert!(
        journal.contains(EDIT) && journal.contains("defrag.enabled"),
        "the journal does not name the file and the key: {journal}"
    );
    c.node_sh_ok(NODE, &format!("rm {EDIT}")).unwrap();
    let done = c.node_sh(NODE, "systemctl reload etcd-warden").unwrap();
    assert!(
        done.success(),
        "systemctl reload: {}{}",
        done.stdout,
        done.stderr
    );
    assert_eq!(
        main_pid(c, NODE).unwrap().0,
        daemon,
        "a reload restarted the daemon"
    );
    assert_eq!(etcd_pid(c, NODE), etcd, "a reload restarted etcd");
    let t1 = Instant::now();
    for n in ["node-a", NODE] {
        w.wait_ack_after(Some(n), t1, Duration::from_secs(30))
            .unwrap();
    }
    let acks = w.acks();
    ["node-a", NODE]
        .iter()
        .map(|n| longest_gap(&acks, Some(n), t0, t1))
        .collect()
}

pub fn restart(c: &FieldCluster) {
    let (w, fences_before) = begin(c, "/field-restart");
    let etcd = etcd_pid(c, NODE);
    let reload_gaps = reload(c, &w, etcd);
    let (daemon, _) = main_pid(c, NODE).unwrap();

    // A plain restart: the same etcd serves on.
    let t_restart = Instant::now();
    restart_adopting(c, etcd);
    let t_back = Instant::now();
    let (new_daemon, _) = main_pid(c, NODE).unwrap();
    assert_ne!(new_daemon, daemon, "the daemon was not restarted");
    w.wait_ack_after(Some(NODE), t_back, Duration::from_secs(30))
        .unwrap();
    let acks = w.acks();
    let gaps: Vec<Duration> = ["node-a", NODE]
        .iter()
        .map(|n| longest_gap(&acks, Some(n), t_restart, t_back))
        .collect();
    for (n, g) in ["node-a", NODE].iter().zip(&gaps) {
        assert!(
            *g <= RESTART_GAP,
            "{n} went {g:?} without a write across the daemon restart"
        );
    }

    // A typo, then a restart: the daemon exits 78 and stays down.
    c.node_sh_ok(
        NODE,
        &format!(
            "mkdir -p /etc/etcd-warden/config.d && \
             printf '[timeouts]\\nprobe_timeout_ms = \"fast\"\\n' > {TYPO}"
        ),
    )
    .unwrap();
    let t_typo = Instant::now();
    let failed = c.node_sh(NODE, "systemctl restart etcd-warden").unwrap();
    assert!(
        !failed.success(),
        "systemctl restart succeeded with a broken configuration"
    );
    let show = |prop: &str| {
        c.node_sh_ok(
            NODE,
            &format!("systemctl show etcd-warden -p {prop} --value"),
        )
        .unwrap()
        .stdout
        .trim()
        .to_string()
    };
    assert_eq!(
        (show("ActiveState"), show("ExecMainStatus")),
        ("failed".to_string(), "78".to_string()),
        "the daemon's unit after the typo"
    );
    let status = c.node_sh(NODE, "etcd-warden status").unwrap();
    assert_eq!(
        status.status.code(),
        Some(78),
        "etcd-warden status with a broken configuration: {}{}",
        status.stdout,
        status.stderr
    );
    let said = format!("{}{}", status.stdout, status.stderr);
    assert!(
        said.contains(TYPO) && said.contains("probe_timeout_ms"),
        "etcd-warden status does not name the file and the key: {said}"
    );
    // etcd serves on without its daemon; nothing fails over.
    while t_typo.elapsed() < DAEMON_DOWN {
        let t = Instant::now();
        w.wait_ack_after(Some(NODE), t, Duration::from_secs(10))
            .unwrap();
        assert!(runs(c, NODE, etcd), "etcd (PID {etcd}) stopped on {NODE}");
        std::thread::sleep(Duration::from_secs(2));
    }
    assert_no_new_fence(
        c,
        fences_before,
        "a daemon down for a typo must not fence anyone",
    );
    assert_no_failed_action(c);

    // The typo removed: a restart adopts the same etcd.
    c.node_sh_ok(NODE, &format!("rm {TYPO}")).unwrap();
    let t_fixed = Instant::now();
    restart_adopting(c, etcd);
    wait_all_voters(c, "node-a", Duration::from_secs(60)).unwrap();
    for n in ["node-a", NODE] {
        w.wait_ack_after(Some(n), Instant::now(), Duration::from_secs(30))
            .unwrap();
    }
    assert_no_new_fence(c, fences_before, "daemon restarts must not fence anyone");
    assert_no_failed_action(c);
    let acks = w.acks();
    let down_gap = longest_gap(&acks, Some(NODE), t_typo, Instant::now());
    let n = check_writes(c, w, "node-a").unwrap();
    eprintln!(
        "field_restart: systemctl reload (applied, refused, applied) -> same daemon and etcd, \
         longest write gap node-a {:.2} s, {NODE} {:.2} s",
        reload_gaps[0].as_secs_f64(),
        reload_gaps[1].as_secs_f64()
    );
    eprintln!(
        "field_restart: systemctl restart -> same etcd (PID {etcd}), longest write gap node-a {:.2} s, \
         {NODE} {:.2} s; with a typo the daemon stayed down {:.1} s (exit 78), longest {NODE} gap \
         then {:.2} s; {n} acknowledged writes, all present",
        gaps[0].as_secs_f64(),
        gaps[1].as_secs_f64(),
        t_fixed.duration_since(t_typo).as_secs_f64(),
        down_gap.as_secs_f64()
    );
}
