//! Adoption: a restarted daemon finds the etcd its previous instance left
//! running (through the PID file: PID *and* start time must match, so a
//! reused PID is never touched; without one, by the configured binary run
//! with this daemon's `--config-file`, as a daemon killed between the spawn
//! and the PID file leaves it) and supervises it again as it is, when it is
//! provably the etcd this configuration would run ([`adoptable`]);
//! otherwise it stops it gracefully before it does anything else. An
//! adopted etcd is not the daemon's child, so its death is noticed by
//! polling /proc instead of waiting for it.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::{Inner, Previous, ProcessSupervisor, exited};
use crate::config::Settings;
use crate::etcd::conf::{self, StartMode};
use crate::supervise::{
    SuperviseError, alive, is_frozen, proc_pgrp, proc_stat, same_process, signal_group,
};

/// How often an adopted etcd (not our child: no exit notification) is
/// looked for in /proc.
const ADOPTED_POLL: Duration = Duration::from_millis(100);

/// Keys of the generated etcd configuration that depend on how etcd was
/// started (bootstrap, join, forced new cluster), not on what it is: they
/// may differ between a running etcd and a fresh rendering without making it
/// another etcd.
const START_MODE_KEYS: [&str; 4] = [
    "initial-cluster",
    "initial-cluster-state",
    "initial-cluster-token",
    "force-new-cluster",
];

impl ProcessSupervisor {
    /// At daemon start: find the etcd a previous daemon instance left
    /// running (via the PID file, PID and start time both matching) and
    /// adopt it, or stop it if it cannot be adopted (see [`adoptable`]).
    pub(crate) async fn take_over(&self, grace: Duration) -> Result<Previous, SuperviseError> {
        let _op = self.op.lock().await;
        let recorded = self.read_pid_file().filter(|(pid, start)| {
            let alive = same_process(*pid, *start);
            if !alive {
                let _ = std::fs::remove_file(self.pid_file());
            }
            alive
        });
        let Some((pid, start)) = recorded.or_else(|| self.unrecorded()) else {
            return Ok(Previous::None);
        };
        match adoptable(&self.settings, pid) {
            Ok(()) => {
                self.follow_log();
                self.state_tx.send_replace(Inner::Running { pid });
                self.watch_adopted(pid, start);
                tracing::info!(
                    pid,
                    log = %conf::log_path(&self.settings).display(),
                    "adopted the etcd left running by a previous etcd-warden instance"
                );
                Ok(Previous::Adopted { pid })
            }
            Err(why) => {
                tracing::warn!(
                    pid,
                    %why,
                    "an etcd started by a previous etcd-warden instance is still running and cannot be adopted; stopping it"
                );
                stop_group(pid, grace).await?;
                let _ = std::fs::remove_file(self.pid_file());
                Ok(Previous::Stopped { pid, why })
            }
        }
    }

    /// An etcd this configuration runs that no PID file names: the
    /// configured binary started with this daemon's `--config-file`. Its
    /// PID file is then written, so that everything after (the agent's
    /// record, a stop) goes by PID and start time again.
    fn unrecorded(&self) -> Option<(u32, u64)> {
        let (pid, start) = find_by_config(&self.settings)?;
        tracing::warn!(
            pid,
            "found an etcd running with this daemon's configuration that no PID file names (a daemon died right after starting it)"
        );
        if let Err(e) = crate::atomic_file::write(
            &self.pid_file(),
            format!("{pid} {start}\n").as_bytes(),
            crate::atomic_file::Replace::Durable,
        ) {
            tracing::warn!(error = %e, "cannot write the etcd PID file");
        }
        Some((pid, start))
    }

    /// Notice the end of an adopted etcd: it is not our child, so no exit
    /// status arrives; its /proc entry going away (or turning into a zombie
    /// of its new parent) is the sign.
    fn watch_adopted(&self, pid: u32, start: u64) {
        let tx = self.state_tx.clone();
        let tail = self.tail.clone();
        let pid_file = self.pid_file();
        tokio::spawn(async move {
            while same_process(pid, start) {
                tokio::time::sleep(ADOPTED_POLL).await;
            }
            exited(
                &tx,
                &tail,
                &pid_file,
                pid,
                "exit status unknown: an adopted etcd is not the daemon's child".into(),
            );
        });
    }
}

/// The process (PID, start time) running the configured etcd binary with
/// `--config-file` this configuration's etcd configuration, if one does.
pub(crate) fn find_by_config(s: &Settings) -> Option<(u32, u64)> {
    let config = s.etcd_config_path();
    let binary = s.etcd.binary.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id())
        .find(|pid| {
            let args = cmdline(*pid);
            args.first() == Some(&binary)
                && args
                    .windows(2)
                    .any(|w| w[0] == "--config-file" && Path::new(&w[1]) == config)
        })
        .and_then(|pid| proc_stat(pid).map(|(_, start)| (pid, start)))
}

/// The command line of `pid`, an argument each (empty when unreadable).
fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

pub(crate) fn parse_pid_file(text: &str) -> Option<(u32, u64)> {
    let mut parts = text.split_whitespace();
    let pid = parts.next()?.parse::<u32>().ok()?;
    let start = parts.next()?.parse::<u64>().ok()?;
    (pid > 1).then_some((pid, start))
}

/// Whether the running `pid` (already known to be the process named in the
/// PID file) may be adopted: it must be exactly the etcd this configuration
/// would run, able to go on without the daemon, and able to answer. `Err`
/// says why not.
pub(crate) fn adoptable(s: &Settings, pid: u32) -> Result<(), String> {
    if is_frozen(pid) {
        return Err("it is stopped by a signal and cannot answer".into());
    }
    // The stop path signals the process group: it must be etcd's own.
    if proc_pgrp(pid) != Some(pid) {
        return Err("it does not lead a process group of its own".into());
    }
    // Empty when unreadable or not yet exec'd: not the configured binary.
    let args = cmdline(pid);
    let binary = s.etcd.binary.to_string_lossy();
    if args.first().map(String::as_str) != Some(binary.as_ref()) {
        return Err(format!(
            "it runs {:?}, not the configured etcd binary {binary}",
            args.first().map(String::as_str).unwrap_or("")
        ));
    }
    // When readable, the executable too: a link swapped under the same path
    // would make it a different binary.
    if let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) {
        let exe = exe.to_string_lossy().into_owned();
        // A replaced binary (package upgrade) shows " (deleted)": the etcd
        // is the same; the new binary takes effect at its next start.
        let exe = exe.strip_suffix(" (deleted)").unwrap_or(&exe);
        let want = std::fs::canonicalize(&s.etcd.binary).unwrap_or_else(|_| s.etcd.binary.clone());
        if Path::new(exe) != want {
            return Err(format!(
                "its executable is {exe}, not the configured {}",
                want.display()
            ));
        }
    }
    let config = s.etcd_config_path();
    let with_config = args
        .windows(2)
        .any(|w| w[0] == "--config-file" && Path::new(&w[1]) == config);
    if !with_config {
        return Err(format!(
            "it was not started with --config-file {}",
            config.display()
        ));
    }
    // An etcd writing to a pipe (started by an etcd-warden before the log
    // file) dies of SIGPIPE at its next log line once the pipe's reader is
    // gone: adopting it would only postpone its death to a moment nobody
    // chose.
    for fd in [1, 2] {
        if let Ok(target) = std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
            && target.to_string_lossy().starts_with("pipe:")
        {
            return Err(format!(
                "its fd {fd} is a pipe whose reader is gone (it would die of SIGPIPE)"
            ));
        }
    }
    // etcd.user changed: the etcd to run is another account's.
    if let Some(uid) = proc_uid(pid)
        && uid != s.etcd.user.uid
    {
        return Err(format!(
            "it runs as uid {uid}, not as {} (uid {}, etcd.user)",
            s.etcd.user.name, s.etcd.user.uid
        ));
    }
    let changed = config_changes(s)?;
    if !changed.is_empty() {
        return Err(format!(
            "the configuration changed since it started ({})",
            changed.join(", ")
        ));
    }
    Ok(())
}

/// The real uid of `pid` (the `Uid:` line of /proc/PID/status).
fn proc_uid(pid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The keys in which the etcd configuration on disk (the one the running
/// etcd was started with; it is rewritten only at a start) differs from what
/// the current settings render, start-mode keys aside.
fn config_changes(s: &Settings) -> Result<Vec<String>, String> {
    let path = s.etcd_config_path();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read its configuration {}: {e}", path.display()))?;
    let running: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("its configuration {} is not JSON: {e}", path.display()))?;
    let Some(old) = running.as_object() else {
        return Err(format!(
            "its configuration {} is not a JSON object",
            path.display()
        ));
    };
    // What a normal and a forced start would write now (a forced start may
    // tune more than the start-mode keys, e.g. a shorter election timeout):
    // a key changed when the running value matches neither.
    let renders: Vec<serde_json::Value> = [StartMode::Normal, StartMode::ForceNewCluster]
        .iter()
        .map(|m| conf::render(s, m))
        .collect();
    let mut changed: Vec<String> = old
        .keys()
        .chain(
            renders
                .iter()
                .filter_map(|r| r.as_object())
                .flat_map(|r| r.keys()),
        )
        .filter(|k| !START_MODE_KEYS.contains(&k.as_str()))
        .filter(|k| renders.iter().all(|r| r.get(k.as_str()) != old.get(*k)))
        .cloned()
        .collect();
    changed.sort();
    changed.dedup();
    Ok(changed)
}

/// Stop the process group led by `pid` (not our child: polled, not waited
/// for): SIGCONT, SIGTERM, SIGKILL after `grace`.
async fn stop_group(pid: u32, grace: Duration) -> Result<(), SuperviseError> {
    // A frozen process must be continued to act on SIGTERM.
    for sig in [Signal::SIGCONT, Signal::SIGTERM] {
        if let Err(e) = signal_group(pid, sig) {
            tracing::warn!(pid, error = %e, "cannot signal the orphaned etcd");
        }
    }
    if !wait_gone(pid, grace).await {
        signal_group(pid, Signal::SIGKILL)?;
        if !wait_gone(pid, Duration::from_secs(5)).await {
            return Err(SuperviseError::Stop(format!(
                "orphaned etcd {pid} survived SIGKILL"
            )));
        }
    }
    Ok(())
}

/// Polls until `pid` is gone; an orphan is not our child, so it cannot be
/// waited for.
async fn wait_gone(pid: u32, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if !alive(pid) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{free_port, settings};
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::path::PathBuf;
    use std::process::Stdio;

    /// A real etcd, run as the supervisor runs it (own process group,
    /// `--config-file`), killed by PID on drop.
    struct Etcd(std::process::Child);

    impl Etcd {
        fn spawn(s: &Settings, out: Stdio) -> Etcd {
            let child = std::process::Command::new(&s.etcd.binary)
                .arg("--config-file")
                .arg(s.etcd_config_path())
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .unwrap();
            // Right after the spawn the exec may still be under way (an
            // empty command line): wait until /proc shows etcd's.
            let cmdline = format!("/proc/{}/cmdline", child.id());
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while std::fs::read(&cmdline).unwrap_or_default().is_empty() {
                assert!(std::time::Instant::now() < deadline, "etcd never exec'd");
                std::thread::sleep(Duration::from_millis(10));
            }
            Etcd(child)
        }
    }

    impl Drop for Etcd {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn pid_file_parsing() {
        assert_eq!(parse_pid_file("123 456\n"), Some((123, 456)));
        assert_eq!(parse_pid_file("123\n"), None);
        assert_eq!(parse_pid_file("x 456"), None);
        assert_eq!(parse_pid_file("1 456"), None, "never init");
        assert_eq!(parse_pid_file(""), None);
    }

    #[test]
    fn config_changes_ignore_the_start_mode_and_name_what_changed() {
        let d = tempfile::tempdir().unwrap();
        let s = settings(d.path(), "/usr/bin/etcd", (2380, 2379));
        assert!(config_changes(&s).unwrap_err().contains("cannot read"));
        // Written by a forced-new-cluster start: still the same etcd.
        conf::write(&s, &StartMode::ForceNewCluster).unwrap();
        assert_eq!(config_changes(&s).unwrap(), Vec::<String>::new());
        // The data dir moved in the configuration: another etcd.
        let mut moved = s.clone();
        moved.etcd.data_dir = d.path().join("elsewhere");
        assert_eq!(config_changes(&moved).unwrap(), ["data-dir"]);
        std::fs::write(s.etcd_config_path(), "[1]").unwrap();
        assert!(
            config_changes(&s)
                .unwrap_err()
                .contains("not a JSON object")
        );
    }

    #[test]
    fn a_process_that_is_not_the_configured_etcd_is_not_adoptable() {
        let d = tempfile::tempdir().unwrap();
        let s = settings(d.path(), "/usr/bin/etcd", (2380, 2379));
        conf::write(&s, &StartMode::Normal).unwrap();
        // The test process itself: not in a group of its own, not etcd.
        let why = adoptable(&s, std::process::id()).unwrap_err();
        assert!(
            why.contains("process group") || why.contains("not the configured"),
            "{why}"
        );
        // A process leading its own group, but another binary.
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let why = adoptable(&s, sleeper.id()).unwrap_err();
        assert!(why.contains("not the configured etcd binary"), "{why}");
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
    }

    #[test]
    fn a_real_etcd_is_adoptable_unless_on_a_pipe_or_reconfigured() {
        // Fails, never skips, without etcd.
        assert!(
            Path::new("/usr/bin/etcd").exists(),
            "etcd is not installed at /usr/bin/etcd"
        );
        let d = tempfile::tempdir().unwrap();
        let s = settings(d.path(), "/usr/bin/etcd", (free_port(), free_port()));
        conf::write(&s, &StartMode::Normal).unwrap();

        // On a file: adoptable; with another data dir configured: not.
        let log = std::fs::File::create(d.path().join("out")).unwrap();
        let etcd = Etcd::spawn(&s, Stdio::from(log));
        assert_eq!(adoptable(&s, etcd.0.id()), Ok(()));
        // Found without a PID file by its binary and configuration file;
        // another configuration's etcd is not this one.
        assert_eq!(find_by_config(&s).map(|(p, _)| p), Some(etcd.0.id()));
        let mut elsewhere = s.clone();
        elsewhere.state_dir = d.path().join("other-state");
        assert_ne!(elsewhere.etcd_config_path(), s.etcd_config_path());
        assert_eq!(find_by_config(&elsewhere), None);
        let mut moved = s.clone();
        moved.etcd.data_dir = d.path().join("elsewhere");
        let why = adoptable(&moved, etcd.0.id()).unwrap_err();
        assert!(why.contains("data-dir"), "{why}");
        let mut other_binary = s.clone();
        other_binary.etcd.binary = PathBuf::from("/usr/local/bin/etcd");
        let why = adoptable(&other_binary, etcd.0.id()).unwrap_err();
        assert!(why.contains("not the configured etcd binary"), "{why}");
        // Frozen: it could not answer.
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(etcd.0.id() as i32),
            Signal::SIGSTOP,
        )
        .unwrap();
        let frozen = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            is_frozen(etcd.0.id())
        });
        assert!(frozen);
        let why = adoptable(&s, etcd.0.id()).unwrap_err();
        assert!(why.contains("stopped by a signal"), "{why}");
        drop(etcd);

        // On a pipe (as an older daemon ran it): it would die of SIGPIPE.
        let etcd = Etcd::spawn(&s, Stdio::piped());
        let why = adoptable(&s, etcd.0.id()).unwrap_err();
        assert!(why.contains("pipe"), "{why}");
    }
}
