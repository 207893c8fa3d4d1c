//! The `process` backend: etcd runs as the daemon's child, in a process
//! group of its own (so that a stop signal reaches it and only it). Its log,
//! stdout and stderr go to `STATE_DIR/etcd.log`, which the daemon follows and
//! forwards to tracing ([`super::logtail`]); never to a pipe, so that etcd
//! can outlive the daemon.
//!
//! The PID and start time of the running etcd are kept in
//! `STATE_DIR/etcd.pid`. If the daemon is SIGKILLed, its etcd keeps running
//! and serving. A restarted daemon finds it through that file (PID *and*
//! start time must match, so a reused PID is never touched) and adopts it
//! as it is, when it is provably the etcd this configuration would run
//! (see [`adoptable`]); otherwise it stops it gracefully before it does
//! anything else. An adopted etcd is not the daemon's child, so its death is
//! noticed by polling /proc instead of waiting for it. See docs/daemon.md.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::Command;
use tokio::sync::{Mutex, watch};

use super::logtail::{self, LogTail};
use super::{
    ProcState, SuperviseError, Supervisor, alive, is_frozen, proc_pgrp, proc_stat, same_process,
};
use crate::config::Settings;
use crate::etcd_conf::{self, StartMode};

/// How often the log file is read.
const LOG_POLL: Duration = Duration::from_millis(200);

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

/// etcd as a child process.
#[derive(Debug)]
pub struct ProcessSupervisor {
    settings: Arc<Settings>,
    // Serialises start, stop and take-over.
    op: Mutex<()>,
    state_tx: watch::Sender<Inner>,
    // etcd's log file, followed from where it ended when the daemon started.
    tail: Arc<std::sync::Mutex<LogTail>>,
    // Whether the task following the log runs (started with the first etcd).
    following: AtomicBool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Inner {
    Stopped,
    Running { pid: u32 },
    Stopping { pid: u32 },
    Died { pid: u32, how: String },
}

/// What a daemon start found of the etcd of a previous daemon instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Previous {
    /// None is running.
    None,
    /// It runs and is supervised again, as it is: same PID, no restart.
    Adopted {
        /// Its PID.
        pid: u32,
    },
    /// It ran but could not be adopted, for the reason given; it was
    /// stopped (SIGTERM, SIGKILL after the grace).
    Stopped {
        /// Its PID.
        pid: u32,
        /// Why it was not adopted.
        why: String,
    },
}

impl ProcessSupervisor {
    /// A supervisor for the etcd described by `settings`.
    pub fn new(settings: Arc<Settings>) -> Self {
        let (state_tx, _) = watch::channel(Inner::Stopped);
        let tail = LogTail::from_end(etcd_conf::log_path(&settings));
        ProcessSupervisor {
            settings,
            op: Mutex::new(()),
            state_tx,
            tail: Arc::new(std::sync::Mutex::new(tail)),
            following: AtomicBool::new(false),
        }
    }

    fn pid_file(&self) -> PathBuf {
        self.settings.state_dir.join("etcd.pid")
    }

    /// `(pid, start time)` from the PID file; a malformed file is removed.
    fn read_pid_file(&self) -> Option<(u32, u64)> {
        let text = std::fs::read_to_string(self.pid_file()).ok()?;
        match parse_pid_file(&text) {
            Some(v) => Some(v),
            None => {
                tracing::warn!(file = %self.pid_file().display(), "ignoring a malformed PID file");
                let _ = std::fs::remove_file(self.pid_file());
                None
            }
        }
    }

    /// At daemon start: find the etcd a previous daemon instance left
    /// running (via the PID file, PID and start time both matching) and
    /// adopt it, or stop it if it cannot be adopted (see [`adoptable`]).
    pub async fn take_over(&self, grace: Duration) -> Result<Previous, SuperviseError> {
        let _op = self.op.lock().await;
        let Some((pid, start)) = self.read_pid_file() else {
            return Ok(Previous::None);
        };
        if !same_process(pid, start) {
            let _ = std::fs::remove_file(self.pid_file());
            return Ok(Previous::None);
        }
        match adoptable(&self.settings, pid) {
            Ok(()) => {
                self.follow_log();
                self.state_tx.send_replace(Inner::Running { pid });
                self.watch_adopted(pid, start);
                tracing::info!(
                    pid,
                    log = %etcd_conf::log_path(&self.settings).display(),
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

    /// Start following the log file (once; the task ends with the
    /// supervisor).
    fn follow_log(&self) {
        if self.following.swap(true, Ordering::SeqCst) {
            return;
        }
        let tail = Arc::downgrade(&self.tail);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(LOG_POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // An unreadable file is reported once per distinct error, not
            // every tick.
            let mut last_error: Option<String> = None;
            loop {
                tick.tick().await;
                let Some(tail) = tail.upgrade() else { break };
                match drain(&tail, true) {
                    Ok(()) => last_error = None,
                    Err(e) => {
                        let e = e.to_string();
                        if last_error.as_deref() != Some(e.as_str()) {
                            tracing::warn!(error = %e, "cannot read etcd's log file");
                            last_error = Some(e);
                        }
                    }
                }
            }
        });
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

fn parse_pid_file(text: &str) -> Option<(u32, u64)> {
    let mut parts = text.split_whitespace();
    let pid = parts.next()?.parse::<u32>().ok()?;
    let start = parts.next()?.parse::<u64>().ok()?;
    (pid > 1).then_some((pid, start))
}

/// Whether the running `pid` (already known to be the process named in the
/// PID file) may be adopted: it must be exactly the etcd this configuration
/// would run, able to go on without the daemon, and able to answer. `Err`
/// says why not.
pub fn adoptable(s: &Settings, pid: u32) -> Result<(), String> {
    if is_frozen(pid) {
        return Err("it is stopped by a signal and cannot answer".into());
    }
    // The stop path signals the process group: it must be etcd's own.
    if proc_pgrp(pid) != Some(pid) {
        return Err("it does not lead a process group of its own".into());
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map_err(|e| format!("cannot read its command line: {e}"))?;
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
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
    let changed = config_changes(s)?;
    if !changed.is_empty() {
        return Err(format!(
            "the configuration changed since it started ({})",
            changed.join(", ")
        ));
    }
    Ok(())
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
        .map(|m| etcd_conf::render(s, m))
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

/// Read the log file to its end and forward the lines; with `bound`, also
/// keep it under [`logtail::ROTATE_BYTES`] (copy and truncate, etcd
/// writing on).
fn drain(tail: &std::sync::Mutex<LogTail>, bound: bool) -> std::io::Result<()> {
    let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
    t.poll(&mut logtail::forward)?;
    if bound && t.bound(logtail::ROTATE_BYTES, &mut logtail::forward)? {
        tracing::info!(file = %t.path().display(), "etcd's log file was rotated to .1");
    }
    Ok(())
}

/// etcd `pid` is gone: forward its last log lines, forget its PID file,
/// and record the end as a stop (when one was asked for) or a death.
fn exited(
    tx: &watch::Sender<Inner>,
    tail: &std::sync::Mutex<LogTail>,
    pid_file: &Path,
    pid: u32,
    how: String,
) {
    // Its last words come before the news of its death.
    if let Err(e) = drain(tail, false) {
        tracing::debug!(error = %e, "cannot read etcd's log file");
    }
    // Only this etcd's PID file: never one a later start wrote.
    if let Ok(text) = std::fs::read_to_string(pid_file)
        && parse_pid_file(&text).is_some_and(|(p, _)| p == pid)
    {
        let _ = std::fs::remove_file(pid_file);
    }
    tx.send_modify(|st| {
        *st = match st {
            Inner::Stopping { .. } => {
                tracing::info!(pid, %how, "etcd stopped");
                Inner::Stopped
            }
            _ => {
                tracing::error!(pid, %how, "etcd exited unexpectedly");
                Inner::Died { pid, how }
            }
        }
    });
}

/// Stop the process group led by `pid` (not our child: polled, not waited
/// for): SIGCONT, SIGTERM, SIGKILL after `grace`.
async fn stop_group(pid: u32, grace: Duration) -> Result<(), SuperviseError> {
    let pgid = Pid::from_raw(pid as i32);
    // A frozen process must be continued to act on SIGTERM.
    let _ = killpg(pgid, Signal::SIGCONT);
    let _ = killpg(pgid, Signal::SIGTERM);
    if !wait_gone(pid, grace).await {
        let _ = killpg(pgid, Signal::SIGKILL);
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

impl Supervisor for ProcessSupervisor {
    async fn start(&self, mode: StartMode) -> Result<u32, SuperviseError> {
        let _op = self.op.lock().await;
        if let Inner::Running { pid } | Inner::Stopping { pid } = *self.state_tx.borrow() {
            return Err(SuperviseError::AlreadyRunning(pid));
        }
        let binary = &self.settings.etcd.binary;
        if !binary.exists() {
            return Err(SuperviseError::NotInstalled(binary.display().to_string()));
        }
        std::fs::create_dir_all(&self.settings.state_dir).map_err(|e| {
            SuperviseError::Spawn(format!(
                "cannot create {}: {e}",
                self.settings.state_dir.display()
            ))
        })?;
        etcd_conf::write(&self.settings, &mode).map_err(|e| {
            SuperviseError::Spawn(format!(
                "cannot write {}: {e}",
                self.settings.etcd_config_path().display()
            ))
        })?;
        // No etcd writes the log now: forward the previous one's last lines,
        // then rotate a large file by renaming it.
        let log_path = etcd_conf::log_path(&self.settings);
        if let Err(e) = drain(&self.tail, false) {
            tracing::debug!(error = %e, "cannot read etcd's log file");
        }
        match logtail::rotate_if_larger(&log_path, logtail::ROTATE_BYTES) {
            Ok(true) => {
                tracing::info!(file = %log_path.display(), "etcd's log file was rotated to .1")
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(file = %log_path.display(), error = %e, "cannot rotate etcd's log file")
            }
        }
        // stdout and stderr to the log file as well (Go runtime messages
        // bypass zap), opened with O_APPEND like zap's own descriptor.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o640)
            .open(&log_path)
            .map_err(|e| {
                SuperviseError::Spawn(format!("cannot open {}: {e}", log_path.display()))
            })?;
        let log_err = log.try_clone().map_err(|e| {
            SuperviseError::Spawn(format!("cannot open {}: {e}", log_path.display()))
        })?;
        let mut child = Command::new(binary)
            .arg("--config-file")
            .arg(self.settings.etcd_config_path())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            // etcd speaks sd_notify itself; it must not report READY or
            // feed the watchdog on the daemon's behalf.
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            // Own process group: stop signals go to etcd alone, a terminal's
            // Ctrl-C on the daemon does not reach etcd directly, and a
            // restarted daemon can tell its etcd by the group it leads.
            .process_group(0)
            .kill_on_drop(false)
            .spawn()
            .map_err(|e| SuperviseError::Spawn(format!("{}: {e}", binary.display())))?;
        let pid = child
            .id()
            .ok_or_else(|| SuperviseError::Spawn("etcd exited at once".into()))?;
        if let Some((_, start)) = proc_stat(pid)
            && let Err(e) = crate::atomic_file::write(
                &self.pid_file(),
                format!("{pid} {start}\n").as_bytes(),
                crate::atomic_file::Replace::Durable,
            )
        {
            tracing::warn!(error = %e, "cannot write the etcd PID file");
        }
        self.follow_log();
        tracing::info!(pid, ?mode, log = %log_path.display(), "etcd started");
        self.state_tx.send_replace(Inner::Running { pid });
        let tx = self.state_tx.clone();
        let tail = self.tail.clone();
        let pid_file = self.pid_file();
        tokio::spawn(async move {
            let how = match child.wait().await {
                Ok(st) => match (
                    st.code(),
                    std::os::unix::process::ExitStatusExt::signal(&st),
                ) {
                    (Some(c), _) => format!("exit code {c}"),
                    (None, Some(s)) => format!("signal {s}"),
                    _ => "unknown status".into(),
                },
                Err(e) => format!("wait failed: {e}"),
            };
            exited(&tx, &tail, &pid_file, pid, how);
        });
        Ok(pid)
    }

    async fn stop(&self, grace: Duration) -> Result<bool, SuperviseError> {
        let _op = self.op.lock().await;
        let running = match &*self.state_tx.borrow() {
            Inner::Running { pid } | Inner::Stopping { pid } => Some(*pid),
            _ => None,
        };
        let Some(pid) = running else {
            // Died or already stopped: a stop makes it "cleanly stopped".
            self.state_tx.send_replace(Inner::Stopped);
            return Ok(true);
        };
        // The same for a child and an adopted etcd: the task watching it
        // (wait or /proc poll) turns Stopping into Stopped.
        self.state_tx.send_replace(Inner::Stopping { pid });
        let pgid = Pid::from_raw(pid as i32);
        // SIGCONT first: a SIGSTOPped etcd would otherwise sit on SIGTERM
        // until the deadline.
        let _ = killpg(pgid, Signal::SIGCONT);
        let _ = killpg(pgid, Signal::SIGTERM);
        let mut rx = self.state_tx.subscribe();
        let stopped = |st: &Inner| matches!(st, Inner::Stopped | Inner::Died { .. });
        // `is_ok_and` drops the read guard before `send_replace` below.
        if tokio::time::timeout(grace, rx.wait_for(stopped))
            .await
            .is_ok_and(|r| r.is_ok())
        {
            self.state_tx.send_replace(Inner::Stopped);
            return Ok(true);
        }
        tracing::warn!(pid, ?grace, "etcd did not stop in time; sending SIGKILL");
        let _ = killpg(pgid, Signal::SIGKILL);
        // `wait_for` answers with a read guard on the state. It must be gone
        // before `send_replace` takes the write lock: held through a
        // `match`, it deadlocked the daemon's runtime after every SIGKILL
        // (CI: a stop that never answered, then a self-fence).
        let gone = tokio::time::timeout(Duration::from_secs(10), rx.wait_for(stopped))
            .await
            .is_ok_and(|r| r.is_ok());
        if !gone {
            return Err(SuperviseError::Stop(format!(
                "etcd {pid} is still there 10 s after SIGKILL"
            )));
        }
        self.state_tx.send_replace(Inner::Stopped);
        Ok(false)
    }

    async fn state(&self) -> ProcState {
        match &*self.state_tx.borrow() {
            Inner::Stopped => ProcState::Stopped,
            Inner::Running { pid } | Inner::Stopping { pid } => {
                if is_frozen(*pid) {
                    ProcState::Frozen { pid: *pid }
                } else {
                    ProcState::Running { pid: *pid }
                }
            }
            Inner::Died { pid, how } => ProcState::Died {
                pid: *pid,
                how: how.clone(),
            },
        }
    }

    fn name(&self) -> &'static str {
        "process"
    }
}

impl Drop for ProcessSupervisor {
    fn drop(&mut self) {
        // The daemon is going away without a stop (e.g. a panic): take etcd's
        // process group with it rather than leave an unsupervised etcd.
        if let Inner::Running { pid } | Inner::Stopping { pid } = *self.state_tx.borrow() {
            let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;

    /// One-node settings under `dir`, etcd on loopback at `ports`
    /// (peer, client).
    fn settings(dir: &Path, binary: &str, ports: (u16, u16)) -> Settings {
        crate::config::from_texts(&[(
            PathBuf::from("/c.toml"),
            format!(
                r#"
node_name = "a"
topology = "ha"
[etcd]
binary = "{binary}"
data_dir = "{dir}/data"
[paths]
state_dir = "{dir}/state"
[[nodes]]
name = "a"
peer_urls = ["http://127.0.0.1:{peer}"]
client_urls = ["http://127.0.0.1:{client}"]
"#,
                dir = dir.display(),
                peer = ports.0,
                client = ports.1,
            ),
        )])
        .unwrap()
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
        etcd_conf::write(&s, &StartMode::ForceNewCluster).unwrap();
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
        etcd_conf::write(&s, &StartMode::Normal).unwrap();
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

    /// An "etcd" that ignores SIGTERM: the stop must escalate to SIGKILL and
    /// answer. Run on a thread of its own, so that a deadlocked runtime
    /// fails the test instead of hanging it.
    #[test]
    fn a_stop_that_needs_sigkill_answers() {
        let d = tempfile::tempdir().unwrap();
        let script = d.path().join("stubborn-etcd");
        std::fs::write(
            &script,
            "#!/bin/sh\ntrap '' TERM\ntouch \"$0.trapped\"\nwhile :; do sleep 1; done\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let s = Arc::new(settings(
            d.path(),
            script.to_str().unwrap(),
            (free_port(), free_port()),
        ));
        let (tx, rx) = std::sync::mpsc::channel();
        let (pid_tx, pid_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let r = rt.block_on(async {
                let sup = ProcessSupervisor::new(s);
                let pid = sup.start(StartMode::Normal).await?;
                let _ = pid_tx.send(pid);
                // SIGTERM before the trap is set would simply end it.
                let trapped = script.with_extension("trapped");
                while !trapped.exists() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let stopped = sup.stop(Duration::from_millis(300)).await?;
                Ok::<_, SuperviseError>((stopped, sup.state().await))
            });
            let _ = tx.send(r);
        });
        let pid = pid_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let answer = rx.recv_timeout(Duration::from_secs(20));
        // Whatever happened, the stub's group goes (by its own PID).
        let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
        let (graceful, state) = answer
            .expect("the stop did not answer within 20 s (deadlock)")
            .unwrap();
        assert!(!graceful, "the stub ignores SIGTERM: SIGKILL was needed");
        assert!(matches!(state, ProcState::Stopped), "{state:?}");
    }

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

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
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
        etcd_conf::write(&s, &StartMode::Normal).unwrap();

        // On a file: adoptable; with another data dir configured: not.
        let log = std::fs::File::create(d.path().join("out")).unwrap();
        let etcd = Etcd::spawn(&s, Stdio::from(log));
        assert_eq!(adoptable(&s, etcd.0.id()), Ok(()));
        let mut moved = s.clone();
        moved.etcd.data_dir = d.path().join("elsewhere");
        let why = adoptable(&moved, etcd.0.id()).unwrap_err();
        assert!(why.contains("data-dir"), "{why}");
        let mut other_binary = s.clone();
        other_binary.etcd.binary = PathBuf::from("/usr/local/bin/etcd");
        let why = adoptable(&other_binary, etcd.0.id()).unwrap_err();
        assert!(why.contains("not the configured etcd binary"), "{why}");
        // Frozen: it could not answer.
        nix::sys::signal::kill(Pid::from_raw(etcd.0.id() as i32), Signal::SIGSTOP).unwrap();
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
