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
use std::time::Duration;

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

fn build_demo(dir: &Path) -> Result<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&workspace).args([
        "build",
        "--quiet",
        "-p",
        "warden-integration",
        "--bin",
        "failover-demo",
        "-p",
        "etcd-warden",
        "-p",
        "etcd-warden-agent",
    ]);
    if dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd
        .status()
        .context("running cargo build for failover-demo")?;
    ensure!(status.success(), "building failover-demo failed ({status})");
    let bin = dir.join("failover-demo");
    ensure!(bin.exists(), "{} missing after the build", bin.display());
    Ok(bin)
}

fn run() -> Result<ExitCode> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("signal handler")?;
    }
    let bin = build_demo(&profile_dir()?)?;
    let mut child = Command::new(&bin)
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
