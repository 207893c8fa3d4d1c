//! The start gate for etcd's upgrade path: the versions of the real etcd
//! 3.4.23 and 3.5.30 binaries are read from `etcd --version`, and a
//! standalone daemon whose configured binary says it is 3.6.0 (a script:
//! no etcd 3.6 is obtainable here) refuses to start it beside a real etcd
//! 3.5.30 peer, whose version its Status answer gives, naming the peer and
//! the release etcd's 3.5 → 3.6 guide requires. Nothing is started.

#![allow(clippy::unwrap_used)]

mod common;
mod tls_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::*;
use etcd_warden::etcd::version::{Version, binary_version};
use tls_support::etcd35;
use warden_api::{Action, Outcome};

/// A plain etcd child, ended by its PID when dropped (also on panic).
struct Etcd(Child);

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn binary_versions_are_read_from_the_real_binaries() {
    assert_eq!(
        binary_version(Path::new("/usr/bin/etcd")).unwrap(),
        Version::parse("3.4.23").unwrap()
    );
    assert_eq!(
        binary_version(&etcd35("etcd")).unwrap(),
        Version::parse("3.5.30").unwrap()
    );
}

#[test]
fn a_36_binary_is_not_started_beside_an_older_35_peer() {
    let dir = tempfile::tempdir().unwrap();
    let (pc, pp) = (free_port(), free_port());
    let peer_data = dir.path().join("peer");
    let _peer = Etcd(
        Command::new(etcd35("etcd"))
            .args(["--name", "peer", "--data-dir"])
            .arg(&peer_data)
            .arg(format!("--listen-client-urls=http://127.0.0.1:{pc}"))
            .arg(format!("--advertise-client-urls=http://127.0.0.1:{pc}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{pp}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{pp}"
            ))
            .arg(format!("--initial-cluster=peer=http://127.0.0.1:{pp}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for("the 3.5.30 peer answers", READY_LIMIT, || {
        http_get(pc, "/version").filter(|(code, _)| *code == 200)
    });
    // A binary that says it is etcd 3.6.0 and writes a file if it is ever
    // started.
    std::fs::create_dir_all(dir.path().join("bin")).unwrap();
    let fake = dir.path().join("bin/etcd");
    let started = dir.path().join("started");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'etcd Version: 3.6.0'; exit 0; fi\ntouch {}\nsleep 60\n",
            started.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (c, p) = (free_port(), free_port());
    std::fs::create_dir_all(dir.path().join("config.d")).unwrap();
    std::fs::write(
        dir.path().join("config.d/50-test.toml"),
        format!(
            r#"node_name = "here"
[etcd]
user = "root"
binary = "{}"
[[nodes]]
name = "here"
peer_urls = ["http://127.0.0.1:{p}"]
client_urls = ["http://127.0.0.1:{c}"]
[[nodes]]
name = "peer"
peer_urls = ["http://127.0.0.1:{pp}"]
client_urls = ["http://127.0.0.1:{pc}"]
"#,
            fake.display()
        ),
    )
    .unwrap();
    // Autostart: without Pacemaker's failover (which two nodes would
    // otherwise bring), the daemon starts etcd itself, and is refused.
    let mut d = Daemon::in_dir(dir, &[("CIB_file", "/nonexistent/etcd-warden-cib.xml")]);
    d.spawn(true);
    wait_for("the daemon to log the refusal", READY_LIMIT, || {
        d.log()
            .contains("cannot start beside etcd 3.5.30 on peer")
            .then_some(())
    });
    let r = d.action(Action::Start, 0, 30_000);
    assert_eq!(r.outcome, Outcome::Failed, "{r:?}\n{}", d.log());
    let why = r.reason.clone().unwrap_or_default();
    assert!(
        why.contains("etcd 3.6.0 here cannot start beside etcd 3.5.30 on peer")
            && why.contains("3.5.32"),
        "{why}"
    );
    assert!(!started.exists(), "the 3.6 binary was started");
}
