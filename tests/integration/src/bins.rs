//! Locating (and building) the project's binaries from a test or a bench
//! binary, and installing the OCF agent.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use anyhow::{Context, Result, ensure};

/// The workspace root.
pub fn workspace() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    p.canonicalize().unwrap_or(p)
}

/// The profile directory (`target/debug`, `target/release`) the running
/// executable belongs to: tests live in `<profile>/deps`, binaries directly in
/// `<profile>`.
fn profile_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("current_exe")?;
    let dir = exe.parent().context("executable without a directory")?;
    Ok(if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent().context("deps without a parent")?.to_path_buf()
    } else {
        dir.to_path_buf()
    })
}

static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The path of binary `bin` of `package`, built first (once per process) in
/// the same profile as the caller, so a test never runs a stale daemon. An
/// environment variable `WARDEN_BIN_<BIN>` (upper case, '-' as '_') names a
/// prebuilt one instead.
pub fn bin(package: &str, bin: &str) -> Result<PathBuf> {
    let var = format!("WARDEN_BIN_{}", bin.to_uppercase().replace('-', "_"));
    if let Some(p) = std::env::var_os(&var) {
        return Ok(PathBuf::from(p));
    }
    let dir = profile_dir()?;
    let path = dir.join(bin);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == bin) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(workspace())
            .args(["build", "--quiet", "-p", package, "--bin", bin]);
        for (k, _) in std::env::vars_os() {
            if k.to_str().is_some_and(set_for_this_test) {
                cmd.env_remove(k);
            }
        }
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let out = cmd.output().context("running cargo build")?;
        ensure!(
            out.status.success(),
            "cargo build -p {package} --bin {bin} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        built.push(bin.to_string());
    }
    ensure!(path.exists(), "{} missing after the build", path.display());
    Ok(path)
}

/// Whether `var` is one cargo sets for the test or bench being run (its
/// package, its crate, its binaries, the jobserver). Passed on to the
/// nested `cargo build`, they reach the build scripts that watch them
/// (ring's watches `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME`): cargo would
/// see them changed since `make test-bins` built the binaries, rebuild
/// ring and everything above it up to the daemon (a minute on two cores,
/// inside the first test's time limit), and the next build from a shell
/// would rebuild it all again.
fn set_for_this_test(var: &str) -> bool {
    const EXACT: &[&str] = &[
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_MAKEFLAGS",
        "OUT_DIR",
    ];
    EXACT.contains(&var) || var.starts_with("CARGO_PKG_") || var.starts_with("CARGO_BIN_EXE_")
}

/// The etcd-warden binary.
pub fn warden() -> Result<PathBuf> {
    bin("etcd-warden", "etcd-warden")
}

/// The OCF agent binary.
pub fn agent() -> Result<PathBuf> {
    bin("etcd-warden-agent", "etcd-warden-agent")
}

/// Where Pacemaker looks for `ocf:etcd-warden:etcd`.
pub const INSTALLED_AGENT: &str = "/usr/lib/ocf/resource.d/etcd-warden/etcd";

/// Installs the freshly built agent and alert wrapper with
/// `resource-agent/install.sh` (atomic renames: running clusters always see
/// whole files).
pub fn install_agent() -> Result<PathBuf> {
    let agent = agent()?;
    let warden = warden()?;
    let out = Command::new(workspace().join("resource-agent/install.sh"))
        .arg("")
        .arg(&agent)
        .arg(&warden)
        .output()
        .context("running resource-agent/install.sh")?;
    ensure!(
        out.status.success(),
        "install.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(PathBuf::from(INSTALLED_AGENT))
}

#[cfg(test)]
mod tests {
    use super::set_for_this_test;

    #[test]
    fn only_what_cargo_sets_for_the_running_test_is_left_out_of_the_nested_build() {
        for v in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_BIN_EXE_failover-bench",
            "CARGO_MAKEFLAGS",
            "OUT_DIR",
        ] {
            assert!(set_for_this_test(v), "{v}");
        }
        for v in [
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_JOBS",
            "PATH",
            "RUSTFLAGS",
        ] {
            assert!(!set_for_this_test(v), "{v}");
        }
    }
}
