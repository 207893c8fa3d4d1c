//! The agent binary on its own (no daemon): meta-data valid under both the
//! OCF 1.0 DTD and the OCF 1.1 RelaxNG schema, validate-all of bad
//! parameters, and an unreachable daemon.

// Tests may unwrap (clippy.toml allows it in #[test] functions; this
// extends that to the helpers of this file).
#![allow(clippy::unwrap_used)]

mod agent_support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use agent_support::{agent, code, run, text, workspace};

const T: Duration = Duration::from_secs(30);

fn meta_data() -> String {
    let out = run(Command::new(agent()).arg("meta-data").env_clear(), T);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    text(&out.stdout)
}

/// `xmllint --valid` on `doc` with `dtd_dir` as the working directory, where
/// the DOCTYPE's relative "ra-api-1.dtd" resolves (as ocf-tester does it).
fn dtd_valid(doc: &str, dtd_dir: &Path) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("md.xml");
    std::fs::write(&file, doc).unwrap();
    let out = run(
        Command::new("sh")
            .arg("-c")
            .arg("xmllint --noout --valid - < \"$1\"")
            .arg("sh")
            .arg(&file)
            .current_dir(dtd_dir),
        T,
    );
    (out.status.success(), text(&out.stderr))
}

fn rng_valid(doc: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("md.xml");
    std::fs::write(&file, doc).unwrap();
    let rng = workspace().join("resource-agent/schemas/ra-api-1.1.rng");
    let out = run(
        Command::new("xmllint")
            .arg("--noout")
            .arg("--relaxng")
            .arg(rng)
            .arg(&file),
        T,
    );
    (out.status.success(), text(&out.stderr))
}

#[test]
fn meta_data_is_valid_under_the_dtd_and_the_rng() {
    let md = meta_data();
    let schemas = workspace().join("resource-agent/schemas");
    let (ok, err) = dtd_valid(&md, &schemas);
    assert!(ok, "DTD (repo copy): {err}\n{md}");
    // The copy ocf-tester uses, when resource-agents is installed.
    let system = Path::new("/usr/share/resource-agents");
    if system.join("ra-api-1.dtd").exists() {
        let (ok, err) = dtd_valid(&md, system);
        assert!(ok, "DTD (system): {err}");
    }
    let (ok, err) = rng_valid(&md);
    assert!(ok, "OCF 1.1 RNG: {err}\n{md}");

    // The checks can fail: an action the internal subset does not list is
    // what the DTD rejects (promote is in ra-api-1.dtd's own list, so this
    // also shows the subset binds first), a reloadable value outside 0/1
    // too, and a content type of "time" is what the RNG rejects.
    let bad = md.replacen("<action name=\"notify\"", "<action name=\"promote\"", 1);
    assert!(!dtd_valid(&bad, &schemas).0, "DTD accepted promote");
    let bad = md.replacen("reloadable=\"1\"", "reloadable=\"yes\"", 1);
    assert!(!dtd_valid(&bad, &schemas).0, "DTD accepted reloadable=yes");
    assert!(!rng_valid(&bad).0, "RNG accepted reloadable=yes");
    let bad = md.replacen("type=\"integer\"", "type=\"time\"", 1);
    assert!(!rng_valid(&bad).0, "RNG accepted type=time");
    // Without the internal subset, the OCF 1.0 DTD rejects the OCF 1.1
    // additions: the subset is what makes the document valid.
    let start = md.find(" [\n").unwrap();
    let end = md.find("]>").unwrap();
    let bare = format!("{}>{}", &md[..start], &md[end + 2..]);
    let (ok, err) = dtd_valid(&bare, &schemas);
    assert!(!ok, "DTD accepted reload-agent without the subset");
    assert!(
        err.contains("reload-agent") || err.contains("reloadable"),
        "{err}"
    );
}

#[test]
fn meta_data_declares_what_the_issue_asks_for() {
    let md = meta_data();
    // OCF 1.1, as the exit codes are: a changed parameter (all of them are
    // reloadable) is applied by reload-agent, not by a restart.
    assert!(md.contains("<version>1.1</version>"));
    assert!(md.contains("<action name=\"reload-agent\""));
    for action in [
        "start",
        "stop",
        "monitor",
        "notify",
        "validate-all",
        "meta-data",
    ] {
        assert!(
            md.contains(&format!("<action name=\"{action}\"")),
            "{action}"
        );
    }
    // An anonymous clone: no promoted role, and no legacy reload.
    for action in ["promote", "demote", "reload"] {
        assert!(
            !md.contains(&format!("<action name=\"{action}\"")),
            "{action} advertised"
        );
    }
    assert!(md.contains("depth=\"0\"") && md.contains("depth=\"10\""));
    // Every parameter: type, default, uniqueness.
    let params: Vec<&str> = md.split("<parameter ").skip(1).collect();
    assert!(params.len() >= 2);
    for p in params {
        let block = &p[..p.find("</parameter>").unwrap()];
        assert!(block.contains("unique=\""), "{block}");
        assert!(block.contains("<content type=\""), "{block}");
        assert!(block.contains("default=\""), "{block}");
        assert!(block.contains("reloadable=\"1\""), "{block}");
    }
}

#[test]
fn meta_data_works_as_nobody_and_without_environment() {
    // ocf-tester runs `su nobody -s /bin/sh -c "<agent> meta-data"`.
    let out = run(
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(agent())
            .arg("meta-data")
            .env_clear(),
        T,
    );
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("<resource-agent name=\"etcd\""));
}

#[test]
fn validate_all_names_the_bad_parameter_with_rc_6() {
    for (param, value) in [
        ("socket", "relative/api.sock"),
        ("socket", "/run/etcd-warden/"),
        ("daemon_wait", "ten"),
        ("daemon_wait", "-3"),
    ] {
        let out = run(
            Command::new(agent())
                .arg("validate-all")
                .env_clear()
                .env(format!("OCF_RESKEY_{param}"), value),
            T,
        );
        assert_eq!(code(&out), 6, "{param}={value}: {}", text(&out.stderr));
        let stderr = text(&out.stderr);
        let reason = stderr
            .lines()
            .find_map(|l| l.strip_prefix("ocf-exit-reason:"))
            .unwrap_or_else(|| panic!("no exit reason: {stderr}"));
        assert!(reason.contains(&format!("'{param}'")), "{reason}");
        assert!(reason.contains(value.trim_end_matches('/')), "{reason}");
    }
}

/// Runs the agent's `action` in a network namespace of its own (`unshare
/// --net`), so that the etcd processes it looks for are only those the test
/// puts there: with `fake_etcd`, a copy of `sleep` named `etcd` runs beside
/// it and is ended by its PID afterwards; the agent runs once that copy
/// shows as `etcd` in /proc (a forked shell is `sh` until it has exec'd,
/// and a loaded machine may run the agent first). `daemon_wait` is 1 s.
fn in_own_netns(agent: &Path, action: &str, socket: &Path, fake_etcd: Option<&Path>) -> Output {
    let script = r#"
        if [ -n "$FAKE_ETCD" ]; then
            "$FAKE_ETCD" 60 & fake=$!
            i=0
            while [ "$(cat /proc/$fake/comm 2>/dev/null)" != etcd ] && [ $i -lt 500 ]; do
                sleep 0.01; i=$((i + 1))
            done
        fi
        "$@"; rc=$?
        if [ -n "$fake" ]; then kill "$fake"; wait "$fake" 2>/dev/null; fi
        exit $rc"#;
    let mut cmd = Command::new("unshare");
    cmd.args(["--net", "--", "sh", "-c", script, "sh"])
        .arg(agent)
        .arg(action)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("OCF_RESKEY_socket", socket)
        .env("OCF_RESKEY_CRM_meta_timeout", "20000")
        // Stop waits this long for a daemon that may be restarting.
        .env("OCF_RESKEY_daemon_wait", "1");
    if let Some(fake) = fake_etcd {
        cmd.env("FAKE_ETCD", fake);
    }
    run(&mut cmd, T)
}

#[test]
fn an_unreachable_daemon_fails_fast_with_a_reason() {
    // Built (if need be) before any clock starts.
    let agent = agent();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("api.sock");
    let fake_etcd = dir.path().join("etcd");
    std::fs::copy("/bin/sleep", &fake_etcd).unwrap();
    // Notify drops its hint without the daemon (0); validate-all finds the
    // daemon missing on this node (5, not the cluster-wide 6). Monitor and
    // stop without a record of etcd's process: with no etcd process in the
    // node's network namespace etcd is stopped (7, 0); with one, nobody can
    // say whose it is (1, 1).
    let cases = [
        ("monitor", None, 7),
        ("stop", None, 0),
        ("validate-all", None, 5),
        ("notify", None, 0),
        ("monitor", Some(fake_etcd.as_path()), 1),
        ("stop", Some(fake_etcd.as_path()), 1),
    ];
    for (action, fake, rc) in cases {
        let t0 = Instant::now();
        let out = in_own_netns(&agent, action, &socket, fake);
        let took = t0.elapsed();
        let with = if fake.is_some() { "with" } else { "without" };
        assert!(took < Duration::from_secs(2), "{action} took {took:?}");
        let stderr = text(&out.stderr);
        assert_eq!(code(&out), rc, "{action} {with} an etcd process: {stderr}");
        assert!(
            stderr.contains("ocf-exit-reason:") && stderr.contains("not reachable"),
            "{action} {with} an etcd process: {stderr}"
        );
    }
    // Start waits daemon_wait for a daemon that may be restarting, but never
    // beyond its own timeout, and says it gave up.
    let t0 = Instant::now();
    let out = run(
        Command::new(&agent)
            .arg("start")
            .env_clear()
            .env("OCF_RESKEY_socket", &socket)
            .env("OCF_RESKEY_daemon_wait", "60")
            .env("OCF_RESKEY_CRM_meta_timeout", "2000"),
        T,
    );
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(2), "start took {took:?}");
    assert!(took > Duration::from_millis(1000), "start took {took:?}");
    assert_eq!(code(&out), 1);
    assert!(
        text(&out.stderr).contains("kept trying"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn unsupported_actions_are_rc_3() {
    for action in ["migrate_to", "promote", "demote"] {
        let out = run(Command::new(agent()).arg(action).env_clear(), T);
        assert_eq!(code(&out), 3, "{action}");
        assert!(text(&out.stderr).contains("ocf-exit-reason:"), "{action}");
    }
}
