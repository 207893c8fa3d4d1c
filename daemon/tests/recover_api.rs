//! `etcd-warden recover` is a client of the daemon: with the daemon running
//! the resolution is planned and carried out by the daemon (`POST
//! /v1/recover`, logged there), a refusal comes back with its reason, and
//! only with the daemon stopped does the command act on the files itself,
//! saying so.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Output};
use std::time::Duration;

use common::*;

fn warden(d: &Daemon, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("--standalone")
        .arg(d.dir.path())
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn epoch(d: &Daemon) -> u64 {
    std::fs::read(d.dir.path().join("state/failover-state.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["epoch"].as_u64())
        .unwrap_or(0)
}

#[test]
fn recover_runs_in_the_daemon_and_offline_only_without_it() {
    let mut d = Daemon::start(true);
    d.wait_ready();
    let me = d.status().node;

    // The plan alone: exit 2, nothing changed, answered by the daemon.
    let out = warden(&d, &["recover", "keep-data-of", "--node", &me]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("will: raise the epoch"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("not running"), "{}", text(&out));
    assert_eq!(epoch(&d), 0);

    // Confirmed: carried out by the daemon, which logs it.
    let out = warden(&d, &["recover", "keep-data-of", "--node", &me, "--confirm"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("done: epoch is now 1"),
        "{}",
        text(&out)
    );
    assert_eq!(epoch(&d), 1);
    wait_for(
        "the daemon's log of the resolution",
        Duration::from_secs(5),
        || {
            d.log()
                .contains("recover: carrying out an operator's resolution")
                .then_some(())
        },
    );

    // A resolution the node refuses (data in the way of a restore) comes
    // back with the daemon's reason, and nothing moves.
    let archives = d.dir.path().join("archives");
    std::fs::create_dir_all(archives.join("1-old/member")).unwrap();
    let out = warden(
        &d,
        &[
            "recover",
            "restore-archive",
            "--node",
            &me,
            "--archive",
            archives.join("1-old").to_str().unwrap(),
            "--confirm",
        ],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("already has data"), "{}", text(&out));
    assert!(archives.join("1-old/member").is_dir());

    // An unknown node is a clear error, from the command itself.
    let out = warden(&d, &["recover", "keep-data-of", "--node", "nope"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("not a configured node"),
        "{}",
        text(&out)
    );

    // The daemon stopped (etcd with it): the command acts itself, and says so.
    kill(d.pid(), 15);
    let code = d.child.as_mut().unwrap().wait().unwrap();
    assert!(code.success(), "{code:?}");
    let out = warden(&d, &["recover", "keep-data-of", "--node", &me, "--confirm"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("the daemon is not running")
            && text(&out).contains("acting on its files directly"),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("done: epoch is now 2"),
        "{}",
        text(&out)
    );
    assert_eq!(epoch(&d), 2);
}
