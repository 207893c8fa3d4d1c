//! The record of the running etcd for the OCF agent
//! ([`warden_api::EtcdRecord`], beside the API socket): PID and start time,
//! backend and unit, client URL and stop grace. The agent reads it only
//! when this daemon does not answer, to judge etcd's health itself and to
//! stop etcd by PID *and* start time (never a process that reused the
//! PID). Kept from what every probe sees of the process, for both backends:
//! written when a new etcd process appears (started, adopted), removed when
//! etcd is gone.

use std::path::PathBuf;
use std::sync::Mutex;

use warden_api::EtcdRecord;

use super::{ProcState, proc_pgrp, proc_stat};
use crate::config::Settings;

/// What the keeper last left on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnDisk {
    /// Not looked at yet (a previous instance may have left a file).
    Unknown,
    /// No record.
    Absent,
    /// The record of this process (PID, start time).
    Process(u32, u64),
}

/// Keeps the record in step with the probes.
#[derive(Debug)]
pub(crate) struct RecordKeeper {
    path: PathBuf,
    unit: Option<String>,
    client_url: String,
    stop_grace_ms: u64,
    backend: &'static str,
    last: Mutex<OnDisk>,
}

impl RecordKeeper {
    /// A keeper for the etcd of `s`, run by the backend named `backend`.
    pub(crate) fn new(s: &Settings, backend: &'static str) -> Self {
        RecordKeeper {
            path: warden_api::etcd_record_path(&s.api.socket),
            unit: (backend == "systemd").then(|| s.etcd.unit_name.clone()),
            client_url: s.local_client_url().to_string(),
            stop_grace_ms: u64::try_from(s.timeouts.stop_grace.as_millis()).unwrap_or(u64::MAX),
            backend,
            last: Mutex::new(OnDisk::Unknown),
        }
    }

    /// Brings the record in line with `proc`, what a probe just saw. A
    /// state the backend could not learn (`Died` with PID 0: systemd did
    /// not answer) changes nothing.
    pub(crate) fn observe(&self, proc: &ProcState) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let next = match proc {
            ProcState::Running { pid }
            | ProcState::Frozen { pid }
            | ProcState::Hung { pid, .. } => {
                match proc_stat(*pid) {
                    Some((_, start)) => OnDisk::Process(*pid, start),
                    // Gone between the two looks: the next probe says so.
                    None => return,
                }
            }
            ProcState::Died { pid: 0, .. } => return,
            ProcState::Stopped | ProcState::Died { .. } => OnDisk::Absent,
        };
        if *last == next {
            return;
        }
        let done = match next {
            OnDisk::Process(pid, start) => self.write(pid, start),
            _ => self.remove(),
        };
        match done {
            Ok(()) => *last = next,
            Err(e) => {
                tracing::warn!(file = %self.path.display(), error = %e, "cannot update the record of etcd for the OCF agent")
            }
        }
    }

    fn write(&self, pid: u32, start_ticks: u64) -> Result<(), String> {
        let record = EtcdRecord {
            backend: self.backend.to_string(),
            pid,
            start_ticks,
            own_group: proc_pgrp(pid) == Some(pid),
            unit: self.unit.clone(),
            client_url: self.client_url.clone(),
            stop_grace_ms: self.stop_grace_ms,
        };
        let text = serde_json::to_vec(&record).map_err(|e| e.to_string())?;
        crate::atomic_file::write(&self.path, &text, crate::atomic_file::Replace::Fast)
            .map_err(|e| e.to_string())
    }

    fn remove(&self) -> Result<(), String> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keeper(dir: &std::path::Path) -> RecordKeeper {
        RecordKeeper {
            path: dir.join(warden_api::ETCD_RECORD),
            unit: None,
            client_url: "http://127.0.0.1:2379".into(),
            stop_grace_ms: 5000,
            backend: "process",
            last: Mutex::new(OnDisk::Unknown),
        }
    }

    fn read(dir: &std::path::Path) -> Option<EtcdRecord> {
        let text = std::fs::read(dir.join(warden_api::ETCD_RECORD)).ok()?;
        Some(serde_json::from_slice(&text).expect("the record is JSON"))
    }

    #[test]
    fn a_running_etcd_is_recorded_with_its_start_time_and_forgotten_when_gone() {
        let d = tempfile::tempdir().unwrap();
        let k = keeper(d.path());
        // A file left by a previous instance goes at the first look.
        std::fs::write(d.path().join(warden_api::ETCD_RECORD), "stale").unwrap();
        k.observe(&ProcState::Stopped);
        assert_eq!(read(d.path()), None);

        let me = std::process::id();
        k.observe(&ProcState::Running { pid: me });
        let r = read(d.path()).expect("recorded");
        assert_eq!(r.pid, me);
        assert_eq!(Some(r.start_ticks), proc_stat(me).map(|(_, s)| s));
        assert_eq!(r.backend, "process");
        assert_eq!(r.stop_grace_ms, 5000);

        // systemd not answering: the record stays.
        k.observe(&ProcState::Died {
            pid: 0,
            how: "cannot ask systemd".into(),
        });
        assert!(read(d.path()).is_some());
        k.observe(&ProcState::Died {
            pid: me,
            how: "signal 9".into(),
        });
        assert_eq!(read(d.path()), None);
    }
}
