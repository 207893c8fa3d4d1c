//! This node's own persisted facts: the state file beside the data (epoch,
//! departure marker, what the data was last seen to be), the reboot-scoped
//! markers under the run directory (boot identity, in-sync marker, when each
//! peer was last seen joining), and archiving a member directory.
//!
//! Every write goes to a temporary file that is fsynced and renamed, and the
//! directory is fsynced after, so that a crash leaves either the old or the
//! new content (the epoch must be on disk before a force, so that a daemon
//! killed right after the force still finds the new history's epoch).

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A local file operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// Reading or writing a file failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file exists but does not parse.
    #[error("{path} is not a valid etcd-warden state file: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

pub(super) fn io<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> LocalError + 'a {
    move |source| LocalError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// The daemon's state file, describing the data directory beside it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFile {
    /// The data's lineage (see `warden_failover::LocalData::epoch`).
    #[serde(default)]
    pub epoch: u64,
    /// The departure marker: written before this node leaves the member list.
    #[serde(default)]
    pub(crate) departed: bool,
    /// The data was seen part of a cluster with quorum.
    #[serde(default)]
    pub formed: bool,
    /// The cluster id last seen live for this data.
    #[serde(default)]
    pub cluster_id: Option<u64>,
    /// This node's member id last seen live for this data.
    #[serde(default)]
    pub member_id: Option<u64>,
    /// The voters last seen live (node names).
    #[serde(default)]
    pub(crate) voters: Vec<String>,
    /// The `initial-cluster-token` this node bootstrapped its data with,
    /// kept until that data forms a cluster (a peer completing the
    /// bootstrap needs the same token).
    #[serde(default)]
    pub(crate) bootstrap_token: Option<String>,
    /// The epoch of a forced restart decided but not yet seen done. It
    /// becomes the epoch only once the live member list shows this node
    /// alone: a power loss between the decision and the restart must not
    /// leave a node claiming a new lineage its data never got, which would
    /// make the peer archive the data the pair still needs.
    #[serde(default)]
    pub pending_epoch: Option<u64>,
    /// A join started and its etcd has not been seen running yet: the
    /// member id is the learner being joined, not data that went missing.
    #[serde(default)]
    pub(crate) joining: bool,
    /// A reseed (this node's own member restarted on an empty directory)
    /// started and its member has not answered yet: a member directory
    /// without a write-ahead log is what a start that failed before the
    /// peer's member list was read leaves (etcd creates the directory
    /// first), not data, and a plain restart over it would bootstrap an
    /// empty cluster.
    #[serde(default)]
    pub(crate) reseeding: bool,
    /// The member id of each voter at the last quorate look, by node
    /// (written with `voters`).
    #[serde(default)]
    pub(crate) voter_ids: std::collections::BTreeMap<String, u64>,
    /// The state file was missing beside data and was written again from
    /// the data's write-ahead log (cluster and member ids): the epoch, the
    /// membership and whether the data formed a cluster are unknown until
    /// the next quorate look.
    #[serde(default)]
    pub(crate) epoch_unknown: bool,
    /// The member id of each voter of the cluster that added this node's
    /// member as a learner, by node (written at the join, from the quorate
    /// look it was decided on; emptied by a reseed).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(crate) added_by: std::collections::BTreeMap<String, u64>,
    /// Revisions a forced restart of this data may have dropped that were
    /// not yet moved past (written before the force, cleared once its
    /// revision step is done): the next start holds clients off until it
    /// is (see `force_held.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) revision_bump_owed: Option<u64>,
}

impl StateFile {
    /// Whether this state says the data was part of a cluster.
    pub(crate) fn had_cluster(&self) -> bool {
        self.formed || self.epoch > 0 || self.cluster_id.is_some() || self.member_id.is_some()
    }

    /// The newest epoch whose writes the data may hold: the epoch, or a
    /// forced restart's epoch not yet seen done.
    pub(crate) fn may_hold_epoch(&self) -> u64 {
        self.epoch.max(self.pending_epoch.unwrap_or(0))
    }
}

/// Write `data` to `path` atomically and durably.
pub(crate) fn write_durably(path: &Path, data: &[u8]) -> Result<(), LocalError> {
    crate::atomic_file::write(path, data, crate::atomic_file::Replace::Durable)
        .map_err(|e| io("cannot write durably", path)(e.into()))
}

pub(super) fn sync_dir(dir: &Path) -> Result<(), LocalError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("cannot fsync directory", dir))
}

/// Where this node's files live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPaths {
    /// etcd's data directory (its `member/` subdirectory is the data).
    pub data_dir: PathBuf,
    /// The state file.
    pub state_file: PathBuf,
    /// Reboot-scoped directory (a tmpfs under /run).
    pub run_dir: PathBuf,
    /// Where archived member directories go (same filesystem as the data,
    /// so that archiving is a rename).
    pub archive_dir: PathBuf,
}

impl LocalPaths {
    /// The member directory.
    pub fn member_dir(&self) -> PathBuf {
        self.data_dir.join("member")
    }

    /// Whether a member directory with data exists. A join that failed
    /// early (the leader's node lost power while etcd asked it for the
    /// cluster) leaves a member directory without a write-ahead log: etcd
    /// creates the directory first. Started on it, etcd would bootstrap a
    /// new cluster of its own; so while the state file says the join (or a
    /// reseed) never completed, such a directory is no data and the start
    /// is retried over it.
    pub fn has_data(&self) -> bool {
        if !self.member_dir().is_dir() {
            return false;
        }
        self.has_wal() || !self.read_state().is_ok_and(|st| st.joining || st.reseeding)
    }

    /// Whether the member directory holds a write-ahead log file (what
    /// etcd itself checks to restart rather than bootstrap or join).
    fn has_wal(&self) -> bool {
        std::fs::read_dir(self.member_dir().join("wal")).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".wal"))
        })
    }

    /// Read the state file; a missing file is the default state.
    pub fn read_state(&self) -> Result<StateFile, LocalError> {
        match std::fs::read(&self.state_file) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| LocalError::Corrupt {
                path: self.state_file.clone(),
                message: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StateFile::default()),
            Err(e) => Err(io("cannot read", &self.state_file)(e)),
        }
    }

    /// Write the state file durably.
    pub(crate) fn write_state(&self, s: &StateFile) -> Result<(), LocalError> {
        let data = serde_json::to_vec_pretty(s).unwrap_or_default();
        write_durably(&self.state_file, &data)
    }

    /// Change the state file with `f`, writing only when it changed.
    pub fn update_state(&self, f: impl FnOnce(&mut StateFile)) -> Result<StateFile, LocalError> {
        let old = self.read_state()?;
        let mut new = old.clone();
        f(&mut new);
        if new != old {
            self.write_state(&new)?;
        }
        Ok(new)
    }

    /// This boot's identity: the kernel's boot id plus a random part kept in
    /// the run directory, so that a node "rebooted" by the test harness (a
    /// fresh /run, same kernel) is a new boot too.
    pub fn boot_id(&self) -> Result<String, LocalError> {
        let path = self.run_dir.join("boot-id");
        match std::fs::read_to_string(&path) {
            Ok(s) if !s.trim().is_empty() => return Ok(s.trim().to_string()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("cannot read", &path)(e)),
        }
        let random = random_hex(4).map_err(io("cannot read", Path::new(URANDOM)))?;
        let id = format!("{}/{random}", kernel_boot_id());
        write_durably(&path, id.as_bytes())?;
        Ok(id)
    }

    fn in_sync_path(&self) -> PathBuf {
        self.run_dir.join("in-sync")
    }

    /// The in-sync marker as written, if one parses.
    pub(crate) fn in_sync_marker(&self) -> Option<InSyncMarker> {
        std::fs::read(self.in_sync_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    }

    /// The in-sync marker's boot id, if a marker is set and still describes
    /// the data (see [`Self::valid_in_sync_marker`]).
    pub fn in_sync(&self) -> Option<String> {
        self.valid_in_sync_marker().map(|m| m.boot_id)
    }

    /// The in-sync marker, if one is set and still describes the data: the
    /// same cluster, member and epoch as the state file now names. A marker
    /// of other data (archived, rejoined, forced since) or in an older
    /// format is no proof, and reads as none. One read of each file.
    pub(crate) fn valid_in_sync_marker(&self) -> Option<InSyncMarker> {
        let m = self.in_sync_marker()?;
        let st = self.read_state().ok()?;
        (st.cluster_id == Some(m.cluster_id)
            && st.member_id == Some(m.member_id)
            && st.epoch == m.epoch
            && !m.boot_id.is_empty())
        .then_some(m)
    }

    /// Set the in-sync marker for `boot_id`, tied to the cluster, member and
    /// epoch the state file names (written from the live view just before).
    pub(crate) fn mark_in_sync(&self, boot_id: &str) -> Result<(), LocalError> {
        self.write_in_sync(boot_id, false)
    }

    /// Set the in-sync marker on an operator's word (`recover
    /// force-new-cluster`): it outlives a stopped etcd, since it is set
    /// exactly while etcd does not run.
    pub(crate) fn mark_in_sync_by_operator(&self, boot_id: &str) -> Result<(), LocalError> {
        self.write_in_sync(boot_id, true)
    }

    fn write_in_sync(&self, boot_id: &str, operator: bool) -> Result<(), LocalError> {
        let st = self.read_state()?;
        let (Some(cluster_id), Some(member_id)) = (st.cluster_id, st.member_id) else {
            return Err(LocalError::Corrupt {
                path: self.state_file.clone(),
                message: "names no cluster or member id: nothing for an in-sync marker to describe"
                    .into(),
            });
        };
        let m = InSyncMarker {
            boot_id: boot_id.to_string(),
            cluster_id,
            member_id,
            epoch: st.epoch,
            operator,
        };
        let data = serde_json::to_vec(&m).unwrap_or_default();
        write_durably(&self.in_sync_path(), &data)
    }

    /// Clear the in-sync marker (it is a marker, not data).
    pub(crate) fn clear_in_sync(&self) -> Result<(), LocalError> {
        let p = self.in_sync_path();
        match std::fs::remove_file(&p) {
            Ok(()) => sync_dir(&self.run_dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io("cannot remove", &p)(e)),
        }
    }
}

/// Writes the SHA-256 of an archive's `member/snap/db` to its `db.sha256`
/// (an unreadable db is recorded as such: the archive is kept either way),
/// reading at most `pace` bytes a second (`None`: as fast as it can).
pub(crate) fn record_checksum(archive: &Path, pace: Option<u64>) -> Result<(), LocalError> {
    let sum = match sha256_file(&archive.join("member").join("snap").join("db"), pace) {
        Ok(s) => s,
        Err(e) => format!("unreadable: {e}"),
    };
    write_durably(
        &archive.join("db.sha256"),
        format!("{sum}  member/snap/db\n").as_bytes(),
    )
}

/// The in-sync marker: this boot's member was a voter with quorum and etcd
/// has run since, so its data holds every acknowledged write. It names the
/// data it describes, so that it proves nothing about other data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct InSyncMarker {
    /// The boot it was set in.
    pub(crate) boot_id: String,
    /// The cluster of the data.
    pub(crate) cluster_id: u64,
    /// The member of the data.
    pub(crate) member_id: u64,
    /// The epoch of the data.
    pub(crate) epoch: u64,
    /// Set by an operator, not from the live view.
    #[serde(default)]
    pub(crate) operator: bool,
}

/// The environment variable the unit sets to systemd's `%b`, the kernel's
/// boot id: the sandbox (`ProcSubset=pid`) hides /proc/sys from the daemon.
pub const KERNEL_BOOT_ID_ENV: &str = "ETCD_WARDEN_KERNEL_BOOT_ID";

/// The kernel's random source, which `PrivateDevices=` keeps.
const URANDOM: &str = "/dev/urandom";

/// The kernel's boot id as journald writes it (32 hex digits, no dashes),
/// from /proc where the daemon can read it, else from
/// [`KERNEL_BOOT_ID_ENV`]; "unknown" when neither has one (the boot id's
/// random part still tells boots apart).
fn kernel_boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .or_else(|| std::env::var(KERNEL_BOOT_ID_ENV).ok())
        .map(|s| s.trim().replace('-', ""))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// `bytes` random bytes from the kernel, in hex.
pub(crate) fn random_hex(bytes: usize) -> std::io::Result<String> {
    let mut buf = vec![0u8; bytes];
    std::fs::File::open(URANDOM)?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// The SHA-256 of a file, in hex, reading at most `pace` bytes a second
/// (`None`: as fast as it can): an archive's checksum runs beside a rejoin,
/// whose snapshot transfer needs the disk and the CPU more.
fn sha256_file(p: &Path, pace: Option<u64>) -> std::io::Result<String> {
    let mut f = std::fs::File::open(p)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let started = std::time::Instant::now();
    let mut read: u64 = 0;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        read += n as u64;
        if let Some(rate) = pace.filter(|r| *r > 0) {
            let due = std::time::Duration::from_secs_f64(read as f64 / rate as f64);
            if let Some(ahead) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(ahead);
            }
        }
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(t: &Path) -> LocalPaths {
        LocalPaths {
            data_dir: t.join("data"),
            state_file: t.join("state/failover.json"),
            run_dir: t.join("run"),
            archive_dir: t.join("archive"),
        }
    }

    #[test]
    fn a_member_dir_left_by_a_failed_join_is_no_data() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        std::fs::create_dir_all(p.member_dir().join("snap")).unwrap();
        assert!(p.has_data(), "outside a join, any member directory counts");
        p.update_state(|s| s.joining = true).unwrap();
        assert!(!p.has_data(), "a join's directory without a log is none");
        std::fs::create_dir_all(p.member_dir().join("wal")).unwrap();
        std::fs::write(
            p.member_dir()
                .join("wal/0000000000000000-0000000000000000.wal"),
            b"x",
        )
        .unwrap();
        assert!(p.has_data(), "once etcd wrote its log, it is data");
    }

    #[test]
    fn archive_moves_the_member_dir_with_a_checksum_and_the_state() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        std::fs::create_dir_all(p.member_dir().join("snap")).unwrap();
        std::fs::write(p.member_dir().join("snap/db"), b"abc").unwrap();
        p.update_state(|s| s.epoch = 3).unwrap();
        let dest = p.archive("stale: peer has epoch 4", 1000).unwrap();
        record_checksum(&dest, None).unwrap();
        assert!(!p.has_data());
        assert_eq!(std::fs::read(dest.join("member/snap/db")).unwrap(), b"abc");
        let sum = std::fs::read_to_string(dest.join("db.sha256")).unwrap();
        assert!(
            sum.starts_with("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        let kept: StateFile =
            serde_json::from_slice(&std::fs::read(dest.join("state.json")).unwrap()).unwrap();
        assert_eq!(kept.epoch, 3);
        assert_eq!(p.read_state().unwrap(), StateFile::default());
        assert_eq!(p.archives(), vec![dest.clone()]);
        // A second archive never overwrites the first.
        std::fs::create_dir_all(p.member_dir()).unwrap();
        let again = p.archive("stale: peer has epoch 4", 1000).unwrap();
        assert_ne!(again, dest);
        assert_eq!(p.archives().len(), 2);
    }

    #[test]
    fn markers_and_boot_id() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        let b = p.boot_id().unwrap();
        assert_eq!(p.boot_id().unwrap(), b);
        // A fresh run directory (a new boot) has another id: its random
        // part never depends on /proc/sys, which the unit's sandbox hides.
        let t2 = tempfile::tempdir().unwrap();
        let other = paths(t2.path()).boot_id().unwrap();
        assert_ne!(other, b);
        let random = b.rsplit('/').next().unwrap();
        assert!(
            random.len() == 8 && random.chars().all(|c| c.is_ascii_hexdigit()),
            "{b}"
        );
        assert_eq!(p.in_sync(), None);
        // Nothing to describe yet: no marker.
        assert!(p.mark_in_sync(&b).is_err());
        p.update_state(|s| {
            s.cluster_id = Some(7);
            s.member_id = Some(9);
            s.epoch = 2;
        })
        .unwrap();
        p.mark_in_sync(&b).unwrap();
        assert_eq!(p.in_sync().as_deref(), Some(b.as_str()));
        // Other data (a force raised the epoch, a rejoin changed the member)
        // is not described by it.
        p.update_state(|s| s.epoch = 3).unwrap();
        assert_eq!(p.in_sync(), None);
        p.update_state(|s| s.epoch = 2).unwrap();
        assert_eq!(p.in_sync().as_deref(), Some(b.as_str()));
        p.update_state(|s| s.member_id = Some(10)).unwrap();
        assert_eq!(p.in_sync(), None);
        // An older plain-text marker proves nothing.
        std::fs::write(p.run_dir.join("in-sync"), b.as_bytes()).unwrap();
        assert_eq!(p.in_sync(), None);
        p.clear_in_sync().unwrap();
        p.clear_in_sync().unwrap();
        assert_eq!(p.in_sync(), None);
    }

    #[test]
    fn a_corrupt_state_file_is_an_error_not_a_default() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        std::fs::create_dir_all(p.state_file.parent().unwrap()).unwrap();
        std::fs::write(&p.state_file, b"{not json").unwrap();
        let e = p.read_state().unwrap_err();
        assert!(e.to_string().contains("not a valid"), "{e}");
    }
}
