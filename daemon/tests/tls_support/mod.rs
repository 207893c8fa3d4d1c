//! Helpers for the etcd 3.5 matrix and the TLS tests: a standalone daemon
//! whose generated config is amended by a drop-in written *before* the first
//! start (so etcd never runs with the defaults), the location of the etcd 3.5
//! binaries, and a throw-away PKI made with the `openssl` CLI.

#![allow(dead_code)]
// Test helpers, not input paths: a failure here is a test failure.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{BIN, Daemon};

/// Where `make etcd35` unpacks etcd 3.5 (3.5.30 or a later 3.5, Debian sid's
/// .debs; workspace root's `target/`).
pub fn etcd35_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/etcd-3.5"))
}

/// An etcd 3.5 binary (`etcd`, `etcdctl`, `etcdutl`). Fails, never skips,
/// when it is missing: a matrix that silently shrinks proves nothing.
pub fn etcd35(name: &str) -> PathBuf {
    let p = etcd35_dir().join(name);
    assert!(
        p.is_file(),
        "{} is missing: run `make etcd35` first (it unpacks the etcd 3.5 test binaries)",
        p.display()
    );
    p
}

/// A standalone daemon whose `config.d/50-test.toml` drop-in is in place
/// before the daemon's first run. `dropin` gets the daemon's dir.
/// crm_mon is pointed at a missing CIB file so that no Pacemaker on this
/// host can influence the result.
pub fn daemon_with_dropin(autostart: bool, dropin: impl FnOnce(&Path) -> String) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let dropins = dir.path().join("config.d");
    std::fs::create_dir_all(&dropins).unwrap();
    std::fs::write(dropins.join("50-test.toml"), dropin(dir.path())).unwrap();
    let mut d = Daemon::in_dir(dir, &[("CIB_file", "/nonexistent/etcd-warden-cib.xml")]);
    d.spawn(autostart);
    d
}

/// Run the CLI against the daemon's standalone dir; panics with stderr on
/// failure, returns stdout.
pub fn cli(d: &Daemon, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .arg("--standalone")
        .arg(d.dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "etcd-warden {args:?} failed: {}\ndaemon log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        d.log()
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The executable behind a PID (to prove which etcd actually runs).
pub fn exe_of(pid: u32) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/exe")).unwrap()
}

/// Files of a throw-away PKI: one CA, a server/peer certificate for
/// 127.0.0.1 (both server and client auth, as etcd's peers need) and a
/// client certificate for etcdctl.
pub struct Pki {
    pub dir: PathBuf,
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub peer_cert: PathBuf,
    pub peer_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out: Output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn leaf(dir: &Path, name: &str, ext: &str) {
    std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
    let (key, csr, crt, extf) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
        format!("{name}.ext"),
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            &format!("/CN=etcd-warden-test-{name}"),
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &crt,
            "-extfile",
            &extf,
        ],
    );
}

/// Generate the PKI in `dir` (which must exist).
pub fn make_pki(dir: &Path) -> Pki {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=etcd-warden-test-ca",
        ],
    );
    let both = "subjectAltName = IP:127.0.0.1\n\
                keyUsage = critical, digitalSignature, keyEncipherment\n\
                extendedKeyUsage = serverAuth, clientAuth\n";
    leaf(dir, "server", both);
    leaf(dir, "peer", both);
    leaf(
        dir,
        "client",
        "keyUsage = critical, digitalSignature, keyEncipherment\n\
         extendedKeyUsage = clientAuth\n",
    );
    Pki {
        dir: dir.to_path_buf(),
        ca: dir.join("ca.crt"),
        server_cert: dir.join("server.crt"),
        server_key: dir.join("server.key"),
        peer_cert: dir.join("peer.crt"),
        peer_key: dir.join("peer.key"),
        client_cert: dir.join("client.crt"),
        client_key: dir.join("client.key"),
    }
}

/// `etcdctl ARGS` (API 3) at the plain client port `client`, 5 s per
/// command.
pub fn etcdctl(tool: &Path, client: u16, args: &[&str]) -> Output {
    Command::new(tool)
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints=http://127.0.0.1:{client}"))
        .arg("--command-timeout=5s")
        .args(args)
        .output()
        .unwrap()
}

/// [`etcdctl`] that must succeed; its stdout.
pub fn etcdctl_ok(tool: &Path, client: u16, args: &[&str]) -> String {
    let out = etcdctl(tool, client, args);
    assert!(
        out.status.success(),
        "etcdctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A command's stdout and stderr, lossy.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
