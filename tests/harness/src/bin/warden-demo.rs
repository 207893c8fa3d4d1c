//! `make demo`: the headline demo. Two nodes with etcd under Pacemaker and
//! an etcd-warden daemon each, a client writing, a node crash, the fence,
//! the survivor writing again, the rejoin (learner, then voter), a summary
//! of what was measured, and a teardown that leaves nothing behind.
//!
//! The demo itself is `failover-demo` of the integration crate: it shares
//! the failover tests' cluster setup, writer and checks, which this crate
//! (the harness they are built on) cannot depend on. This binary builds it
//! in the same profile, runs it, and hands Ctrl-C / SIGTERM on to it so that
//! its teardown runs.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// `target/<profile>`, the directory this binary was built into.
fn profile_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("current_exe")?;
    exe.parent()
        .map(Path::to_path_buf)
        .context("warden-demo has no directory")
}

/// One `cargo build` in the workspace, in the profile of `dir`, with cargo's
/// own progress on the terminal (a first run compiles for minutes).
fn cargo_build(dir: &Path, args: &[&str]) -> Result<()> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&workspace).arg("build").args(args);
    if dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let t = Instant::now();
    println!("warden-demo: cargo build {} …", args.join(" "));
    let status = cmd.status().context("running cargo build")?;
    ensure!(
        status.success(),
        "cargo build {} failed ({status})",
        args.join(" ")
    );
    println!("warden-demo:   built in {:.1}s", t.elapsed().as_secs_f64());
    Ok(())
}

/// The one `cargo build` of everything the demo runs, the same arguments as
/// `make demo`'s (a test compares them): with the packages in one
/// invocation cargo unifies their dependencies' features once, so no crate
/// is compiled twice, and after `make demo` this build has nothing to do.
/// (Built one package at a time, as the tests build the daemon, the shared
/// dependencies would be compiled again with each package's features.)
const BUILD: &[&str] = &[
    "-p",
    "warden-harness",
    "--bin",
    "warden-demo",
    "-p",
    "warden-integration",
    "--bin",
    "failover-demo",
    "-p",
    "etcd-warden",
    "--bin",
    "etcd-warden",
    "-p",
    "etcd-warden-agent",
    "--bin",
    "etcd-warden-agent",
];

/// Builds the demo and the two binaries it runs, and returns the demo's
/// path and the environment that points it at those binaries (the demo
/// then runs no cargo at all).
fn build_demo(dir: &Path) -> Result<(PathBuf, Vec<(String, PathBuf)>)> {
    cargo_build(dir, BUILD)?;
    let mut env = Vec::new();
    for bin in ["etcd-warden", "etcd-warden-agent"] {
        let path = dir.join(bin);
        ensure!(path.exists(), "{} missing after the build", path.display());
        let var = format!("WARDEN_BIN_{}", bin.to_uppercase().replace('-', "_"));
        env.push((var, path));
    }
    let demo = dir.join("failover-demo");
    ensure!(demo.exists(), "{} missing after the build", demo.display());
    Ok((demo, env))
}

fn run() -> Result<ExitCode> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("signal handler")?;
    }
    let (bin, env) = build_demo(&profile_dir()?)?;
    let mut child = Command::new(&bin)
        .envs(env)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let pid = Pid::from_raw(i32::try_from(child.id()).context("child PID")?);
    let mut forwarded = false;
    loop {
        if let Some(status) = child.try_wait().context("waiting for failover-demo")? {
            return Ok(if status.success() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
        // A terminal's Ctrl-C reaches the child too; a SIGTERM sent to this
        // process alone is passed on once, so that the child tears down.
        if stop.load(Ordering::Relaxed) && !forwarded {
            let _ = kill(pid, Signal::SIGTERM);
            forwarded = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("warden-demo: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    /// `make demo` builds with exactly [`super::BUILD`], so that the
    /// demo's own build finds everything fresh.
    #[test]
    fn make_demo_builds_what_the_demo_builds() {
        let makefile = include_str!("../../../../Makefile");
        let line = makefile
            .lines()
            .skip_while(|l| !l.starts_with("demo:"))
            .find(|l| l.contains("build"))
            .unwrap_or_default();
        let want = format!("$(CARGO) build {}", super::BUILD.join(" "));
        assert_eq!(line.trim(), want, "make demo's build line");
    }
}
