//! The daemon with TLS on both etcd sides: a throw-away CA, server, peer and
//! client certificates (openssl CLI, subjectAltName IP:127.0.0.1), https
//! client and peer URLs, `client_cert_auth` on. The daemon must reach its
//! own etcd with the configured identity (readiness, monitors, CLI), etcdctl
//! with a client certificate must work, and plain http must not.

#![allow(clippy::unwrap_used)]

mod common;
mod tls_support;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;
use tls_support::{Pki, cli, daemon_with_dropin, make_pki};
use warden_api::{Action, Outcome};

fn etcdctl(endpoint: &str, tls: &[&std::path::Path], flags: &[&str], args: &[&str]) -> Output {
    let mut cmd = Command::new("etcdctl");
    cmd.env("ETCDCTL_API", "3").args([
        "--endpoints",
        endpoint,
        "--dial-timeout",
        "2s",
        "--command-timeout",
        "3s",
    ]);
    for (flag, path) in flags.iter().zip(tls) {
        cmd.arg(format!("{flag}={}", path.display()));
    }
    cmd.args(args).output().unwrap()
}

/// One node on https loopback URLs with TLS on both etcd sides and client
/// certificates required, as configuration text.
fn tls_node(pki: &Pki, client: u16, peer: u16) -> String {
    let p = |x: &std::path::Path| x.display().to_string();
    format!(
        r#"[[nodes]]
name = "tls"
peer_urls = ["https://127.0.0.1:{peer}"]
client_urls = ["https://127.0.0.1:{client}"]
[tls.client]
cert_file = "{sc}"
key_file = "{sk}"
trusted_ca_file = "{ca}"
client_cert_auth = true
[tls.peer]
cert_file = "{pc}"
key_file = "{pk}"
trusted_ca_file = "{ca}"
client_cert_auth = true
"#,
        sc = p(&pki.server_cert),
        sk = p(&pki.server_key),
        pc = p(&pki.peer_cert),
        pk = p(&pki.peer_key),
        ca = p(&pki.ca),
    )
}

#[test]
fn tls_client_and_peer_with_client_cert_auth() {
    let pki_dir = tempfile::tempdir().unwrap();
    let pki: Pki = make_pki(pki_dir.path());
    let (client, peer) = (free_port(), free_port());
    let dropin = format!("node_name = \"tls\"\n{}", tls_node(&pki, client, peer));
    let t = Instant::now();
    let mut d = daemon_with_dropin(true, move |_| dropin);
    // Readiness needs the daemon's own TLS client to reach etcd.
    let ready = {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if d.http_get("/readyz").is_some_and(|(c, _)| c == 200) {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    assert!(ready, "not ready with TLS; daemon log:\n{}", d.log());
    eprintln!("ready with TLS after {:?}", t.elapsed());

    // The generated etcd config carries both transport-security sections.
    let conf: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.dir.path().join("state/etcd.conf.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        conf["client-transport-security"]["client-cert-auth"], true,
        "{conf}"
    );
    assert_eq!(
        conf["peer-transport-security"]["client-cert-auth"], true,
        "{conf}"
    );

    let s = d.status();
    assert_eq!(s.state, "running", "{s:?}");
    assert!(s.etcd_running && s.quorum && !s.is_learner, "{s:?}");
    assert!(s.member_id.is_some(), "{s:?}");
    for depth in [0, 10] {
        let r = d.action(Action::Monitor, depth, 5000);
        assert_eq!(
            r.outcome,
            Outcome::Success,
            "depth {depth}: {r:?}\n{}",
            d.log()
        );
    }

    let json: serde_json::Value = serde_json::from_str(&cli(&d, &["status", "--json"])).unwrap();
    assert_eq!(json["quorum"], true, "{json}");
    let id: u64 = json["memberId"].as_str().unwrap().parse().unwrap();
    assert_eq!(Some(id), s.member_id);
    let members = cli(&d, &["members"]);
    assert!(members.contains(&format!("{id:x}")), "{members}");
    assert!(
        members.contains(&format!("https://127.0.0.1:{client}")),
        "{members}"
    );

    // etcdctl with the CA and a client certificate works.
    let https = format!("https://127.0.0.1:{client}");
    let full = [pki.ca.as_path(), &pki.client_cert, &pki.client_key];
    let flags = ["--cacert", "--cert", "--key"];
    let out = etcdctl(&https, &full, &flags, &["put", "tls-key", "tls-value"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = etcdctl(
        &https,
        &full,
        &flags,
        &["get", "tls-key", "--print-value-only"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "tls-value");

    // `etcd-warden etcdctl` reads the same key with the configured files
    // and endpoint, nothing given by hand.
    let out = Command::new(BIN)
        .args(["etcdctl", "--standalone"])
        .arg(d.dir.path())
        .args(["get", "tls-key", "--print-value-only"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "tls-value");

    // client_cert_auth: the CA alone (no client certificate) is refused.
    let out = etcdctl(&https, &full[..1], &flags[..1], &["get", "tls-key"]);
    assert!(!out.status.success(), "served without a client certificate");
    // Plain http on the client port is not served.
    match http_get(client, "/version") {
        None => {}
        Some((code, body)) => assert_ne!(code, 200, "plain http served: {body}"),
    }
    let out = etcdctl(
        &format!("http://127.0.0.1:{client}"),
        &[],
        &[],
        &["get", "tls-key"],
    );
    assert!(!out.status.success(), "etcdctl over plain http succeeded");
    // The peer port is TLS too.
    match http_get(peer, "/members") {
        None => {}
        Some((code, body)) => assert_ne!(code, 200, "plain http on the peer port: {body}"),
    }
}

/// The leader's raft progress (what a learner's promotion waits for) is read
/// over the client TLS with the configured identity; without TLS files, or
/// over plain http, the read fails with the reason, never with a guess.
#[test]
fn raft_progress_is_read_over_the_client_tls() {
    use std::sync::Arc;

    use etcd_warden::app::{App, Services};
    use etcd_warden::config;
    use etcd_warden::etcd::conf::StartMode;
    use etcd_warden::etcd::{Connector, LiveEtcd};
    use etcd_warden::reconcile::ports::Supervisor;
    use etcd_warden::supervise::AnySupervisor;
    use etcd_warden::supervise::process::ProcessSupervisor;

    let dir = tempfile::tempdir().unwrap();
    let pki: Pki = make_pki(dir.path());
    let (client, peer) = (free_port(), free_port());
    let text = format!(
        r#"node_name = "tls"
topology = "ha"
[etcd]
user = "root"
binary = "{etcd}"
data_dir = "{d}/data"
[api]
socket = "{d}/api.sock"
[paths]
state_dir = "{d}/state"
{node}"#,
        etcd = etcd_warden::standalone::find_etcd().display(),
        d = dir.path().display(),
        node = tls_node(&pki, client, peer),
    );
    let s = Arc::new(config::from_texts(&[(std::path::PathBuf::from("tls.toml"), text)]).unwrap());
    let app = App::new(Services::new(
        s.clone(),
        AnySupervisor::Process(ProcessSupervisor::new(s)),
    ));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        app.start(StartMode::Normal, Duration::from_secs(30))
            .await
            .unwrap();
        let d = Duration::from_secs(2);
        let deadline = Instant::now() + Duration::from_secs(20);
        let progress = loop {
            match app.etcd.raft_progress(d).await {
                Ok(p) if p.is_leader => break p,
                other => assert!(
                    Instant::now() < deadline,
                    "no leader's raft progress over TLS: {other:?}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        // The one member, as etcd's own Status names it, leads and is in
        // sync with itself.
        let me = app.etcd.status(d).await.unwrap().member_id;
        assert_eq!(progress.id, me, "{progress:?}");
        assert!(progress.in_sync(me), "{progress:?}");

        let https = format!("https://127.0.0.1:{client}");
        let e = LiveEtcd::new(https, Connector::plain())
            .raft_progress(d)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("no [tls.client] files"), "{e}");
        let e = LiveEtcd::new(format!("http://127.0.0.1:{client}"), Connector::plain())
            .raft_progress(d)
            .await
            .unwrap_err();
        eprintln!("plain http to the TLS port: {e}");
        app.stop(Duration::from_secs(5)).await.unwrap();
    });
}
