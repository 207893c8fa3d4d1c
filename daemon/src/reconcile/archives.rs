//! The archives of replaced member directories: listed and ordered by the
//! data they hold, and pruned by `failover.archive_keep`.
//!
//! An archive's place in the order comes from its own files, never from the
//! clock: the epoch of its `state.json` (a forced restart's epoch not yet
//! seen done included: the data may hold writes of it), then the raft index
//! of its data (recorded in `raft-index` when it was made, else read from
//! its member directory, see [`super::held`]), and only then the time in
//! its name. A wall clock stepped back names a new archive with an older
//! time; its data still sorts where it belongs.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::local::{LocalError, LocalPaths, StateFile, io, sync_dir, write_durably};

/// An archive made this recently (by the time in its name, or with a time
/// ahead of the clock) is never pruned, whatever it holds: the archive a
/// pass just made is for an operator to look at.
pub(crate) const PRUNE_GRACE_SECS: u64 = 60 * 60;

/// The file beside an archive's `member/` recording the raft index of its
/// last entry when it was archived.
const RAFT_INDEX_FILE: &str = "raft-index";

/// What an archive holds, from its own files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Held {
    /// The cluster its state file names.
    pub(crate) cluster_id: Option<u64>,
    /// The newest epoch whose writes it may hold
    /// ([`StateFile::may_hold_epoch`]); 0 without a state file.
    pub(crate) epoch: u64,
    /// The raft index of its last entry, when its files name one.
    pub(crate) raft_index: Option<u64>,
}

impl Held {
    /// What the archive at `p` holds.
    pub(crate) fn of(p: &Path) -> Held {
        let state = std::fs::read(p.join("state.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<StateFile>(&b).ok());
        Held {
            cluster_id: state.as_ref().and_then(|s| s.cluster_id),
            epoch: state.as_ref().map_or(0, StateFile::may_hold_epoch),
            raft_index: recorded_raft_index(p)
                .or_else(|| super::held::last_index(&p.join("member"))),
        }
    }
}

/// The raft index recorded when the archive was made.
fn recorded_raft_index(p: &Path) -> Option<u64> {
    std::fs::read_to_string(p.join(RAFT_INDEX_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Records the raft index of `archive`'s data beside it (nothing when its
/// files name none), so that listing archives need not read their logs.
pub(crate) fn record_raft_index(archive: &Path) -> Result<Option<u64>, LocalError> {
    let Some(index) = super::held::last_index(&archive.join("member")) else {
        return Ok(None);
    };
    write_durably(
        &archive.join(RAFT_INDEX_FILE),
        format!("{index}\n").as_bytes(),
    )?;
    Ok(Some(index))
}

/// One archive with what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Archive {
    /// The archive directory.
    pub(crate) path: PathBuf,
    /// What its data is.
    pub(crate) held: Held,
    /// When it was made, the last tie-breaker.
    made: ArchiveOrder,
}

impl Archive {
    fn of(path: PathBuf) -> Archive {
        Archive {
            held: Held::of(&path),
            made: archive_order(&path),
            path,
        }
    }

    /// The order of the data: the epoch, then the raft index, then when the
    /// archive was made.
    fn key(&self) -> (u64, Option<u64>, &ArchiveOrder) {
        (self.held.epoch, self.held.raft_index, &self.made)
    }

    /// Made within [`PRUNE_GRACE_SECS`] before `now_unix`, or later than it
    /// (a clock stepped back since).
    fn recent(&self, now_unix: u64) -> bool {
        self.made
            .0
            .is_none_or(|t| t.saturating_add(PRUNE_GRACE_SECS) > now_unix)
    }
}

impl LocalPaths {
    /// Move the member directory aside into a new archive directory, with
    /// the reason and a copy of the state file beside it. Never a delete: a
    /// rename within the filesystem (a rename across filesystems fails, and
    /// then nothing was moved). Returns the archive directory; its checksum
    /// is [`super::local::record_checksum`]'s, after the move: reading a database of
    /// gigabytes takes seconds, which a rejoin need not wait for, and
    /// nothing writes to the moved data.
    pub(crate) fn archive(&self, reason: &str, now_unix: u64) -> Result<PathBuf, LocalError> {
        let member = self.member_dir();
        std::fs::create_dir_all(&self.archive_dir)
            .map_err(io("cannot create", &self.archive_dir))?;
        let slug: String = reason
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .take(40)
            .collect();
        let mut dest = self
            .archive_dir
            .join(format!("{now_unix}-{}", slug.trim_matches('-')));
        let mut n = 1;
        while dest.exists() {
            dest = self.archive_dir.join(format!("{now_unix}-{n}"));
            n += 1;
        }
        std::fs::create_dir(&dest).map_err(io("cannot create", &dest))?;
        write_durably(&dest.join("reason"), format!("{reason}\n").as_bytes())?;
        if let Ok(state) = std::fs::read(&self.state_file) {
            write_durably(&dest.join("state.json"), &state)?;
        }
        std::fs::rename(&member, dest.join("member")).map_err(io("cannot move aside", &member))?;
        sync_dir(&self.data_dir)?;
        // How far the data goes, read once now (its log was just written,
        // so it is in the page cache); without it the archives' order reads
        // it from the data each time.
        if let Err(e) = record_raft_index(&dest) {
            tracing::warn!(archive = %dest.display(), error = %e, "could not record the archived data's raft index");
        }
        sync_dir(&dest)?;
        // The epoch and markers describe the data that was moved: they went
        // with it (state.json above); the now empty data starts afresh.
        self.write_state(&StateFile::default())?;
        Ok(dest)
    }

    /// The archives kept (directories holding a `member` directory), the
    /// oldest data first (see [`LocalPaths::archives_held`]). A name
    /// starting with `.` is not an archive (see
    /// [`LocalPaths::prune_archives`]).
    pub fn archives(&self) -> Vec<PathBuf> {
        self.archives_held().into_iter().map(|a| a.path).collect()
    }

    /// The archives kept with what each holds, the oldest data first: by
    /// epoch, then by the raft index of the data, then by the time in the
    /// name (then by when the checksum file was written, then by name).
    pub(crate) fn archives_held(&self) -> Vec<Archive> {
        let mut v: Vec<Archive> = std::fs::read_dir(&self.archive_dir)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| !hidden(p) && p.join("member").is_dir())
                    .map(Archive::of)
                    .collect()
            })
            .unwrap_or_default();
        v.sort_by(|a, b| a.key().cmp(&b.key()));
        v
    }

    /// The archive with the newest data of `cluster`; of any cluster when
    /// `cluster` is unknown or no archive holds its data.
    pub(crate) fn newest_archive(&self, cluster: Option<u64>) -> Option<Archive> {
        let all = self.archives_held();
        let of_cluster = all
            .iter()
            .rev()
            .find(|a| cluster.is_some() && a.held.cluster_id == cluster)
            .cloned();
        of_cluster.or_else(|| all.last().cloned())
    }

    /// The archives kept, the oldest data first, with what `/status` and the
    /// report show of each.
    pub(crate) fn archive_infos(&self) -> Vec<ArchiveInfo> {
        self.archives_held()
            .into_iter()
            .map(|a| ArchiveInfo {
                reason: std::fs::read_to_string(a.path.join("reason"))
                    .ok()
                    .map(|r| r.trim().to_string())
                    .filter(|r| !r.is_empty()),
                created_unix: a.made.0,
                epoch: Some(a.held.epoch),
                raft_index: a.held.raft_index,
                size_bytes: dir_size(&a.path),
                made_by_warden: made_by_warden(&a.path),
                path: a.path,
            })
            .collect()
    }

    /// Retention (`failover.archive_keep`), at the clock's time: see
    /// [`LocalPaths::prune_archives_at`].
    pub(crate) fn prune_archives(&self, keep: u32) -> Result<Vec<PathBuf>, LocalError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        self.prune_archives_at(keep, now)
    }

    /// Retention (`failover.archive_keep`): keep the `keep` archives this
    /// daemon made that hold the newest data, and remove the others.
    /// `keep == 0` removes nothing, ever. Only archives whose name is
    /// `<unix time>-<reason>` and that hold the daemon's `db.sha256` or
    /// `reason` are counted or removed (an operator's own directories are
    /// left alone). Never removed, even beyond `keep`: the archive with the
    /// newest data, the one with the newest data of the cluster the state
    /// file names, and any made within [`PRUNE_GRACE_SECS`] before
    /// `now_unix` or with a time after it. Each removal is logged at WARN
    /// with its path. Returns the archives removed.
    ///
    /// A removal first renames the archive to `.pruning-<name>` (so that it
    /// is no longer listed, and a concurrent `recover restore-archive` of
    /// it fails cleanly instead of restoring half of it), then removes that;
    /// a removal interrupted by a crash is finished by the next call.
    pub(crate) fn prune_archives_at(
        &self,
        keep: u32,
        now_unix: u64,
    ) -> Result<Vec<PathBuf>, LocalError> {
        if keep == 0 {
            return Ok(Vec::new());
        }
        self.finish_interrupted_removals()?;
        let all = self.archives_held();
        let cluster = self.read_state().ok().and_then(|s| s.cluster_id);
        let newest = [all.last().cloned(), self.newest_archive(cluster)];
        let protected =
            |a: &Archive| a.recent(now_unix) || newest.iter().flatten().any(|n| n.path == a.path);
        let ours: Vec<Archive> = all
            .into_iter()
            .filter(|a| made_by_warden(&a.path))
            .collect();
        let excess = ours.len().saturating_sub(keep as usize);
        let mut removed = Vec::new();
        for a in ours.into_iter().take(excess).filter(|a| !protected(a)) {
            if self.remove_archive(&a.path, keep)? {
                removed.push(a.path);
            }
        }
        if !removed.is_empty() {
            sync_dir(&self.archive_dir)?;
        }
        Ok(removed)
    }

    /// Leftovers of an interrupted removal were already decided: remove them.
    fn finish_interrupted_removals(&self) -> Result<(), LocalError> {
        let Ok(rd) = std::fs::read_dir(&self.archive_dir) else {
            return Ok(());
        };
        for p in rd.filter_map(Result::ok).map(|e| e.path()) {
            let leftover = p
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(PRUNING_PREFIX))
                .is_some_and(warden_archive_name);
            if leftover {
                tracing::warn!(archive = %p.display(), "finishing the removal of an old archive (failover.archive_keep)");
                std::fs::remove_dir_all(&p).map_err(io("cannot remove", &p))?;
            }
        }
        Ok(())
    }

    /// Set `p` aside and remove it; `false` when it was gone already.
    fn remove_archive(&self, p: &Path, keep: u32) -> Result<bool, LocalError> {
        let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
            return Ok(false);
        };
        let doomed = self.archive_dir.join(format!("{PRUNING_PREFIX}{name}"));
        match std::fs::rename(p, &doomed) {
            Ok(()) => {}
            // Gone meanwhile (restored, removed by hand): nothing to do.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io("cannot set aside for removal", p)(e)),
        }
        tracing::warn!(
            archive = %p.display(),
            keep,
            "removing an old archive: failover.archive_keep keeps only the archives with the newest data"
        );
        std::fs::remove_dir_all(&doomed).map_err(io("cannot remove", &doomed))?;
        Ok(true)
    }
}

/// One archive, as `/status` and `etcd-warden status` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveInfo {
    /// The archive directory (its `member/` is the archived data).
    pub path: PathBuf,
    /// Why it was archived (the `reason` file), when recorded.
    #[serde(default)]
    pub reason: Option<String>,
    /// When it was made (Unix seconds), from its name or its checksum file.
    #[serde(default)]
    pub(crate) created_unix: Option<u64>,
    /// The epoch of its data (its `state.json`; a forced restart's epoch
    /// not yet seen done included).
    #[serde(default)]
    pub(crate) epoch: Option<u64>,
    /// The raft index of its last entry, when its files name one.
    #[serde(default)]
    pub(crate) raft_index: Option<u64>,
    /// Bytes in files under it.
    pub size_bytes: u64,
    /// Made by etcd-warden (its name and `db.sha256`): only such archives
    /// count for, and are removed by, `failover.archive_keep`.
    pub made_by_warden: bool,
}

/// Prefix of an archive being removed by retention.
const PRUNING_PREFIX: &str = ".pruning-";

fn hidden(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_none_or(|n| n.starts_with('.'))
}

/// `<unix seconds>-<slug>` as [`LocalPaths::archive`] names archives.
fn warden_archive_name(name: &str) -> bool {
    match name.split_once('-') {
        Some((secs, rest)) => {
            !secs.is_empty()
                && secs.bytes().all(|b| b.is_ascii_digit())
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        }
        None => false,
    }
}

/// An archive this daemon made: its name, its reason or checksum file (the
/// checksum follows the move by the time the db takes to read), its data.
fn made_by_warden(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(warden_archive_name)
        && (p.join("db.sha256").is_file() || p.join("reason").is_file())
        && p.join("member").is_dir()
}

/// Sort key of an archive: Unix seconds (from the name, else from the
/// checksum file's or the directory's modification time), the same time in
/// nanoseconds, the name.
type ArchiveOrder = (Option<u64>, u128, PathBuf);

fn archive_order(p: &Path) -> ArchiveOrder {
    // The checksum file is written once, when the archive is made.
    let written = std::fs::metadata(p.join("db.sha256"))
        .or_else(|_| std::fs::metadata(p))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    let from_name = p
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| warden_archive_name(n))
        .and_then(|n| n.split_once('-'))
        .and_then(|(secs, _)| secs.parse::<u64>().ok());
    (
        from_name.or(written.map(|d| d.as_secs())),
        written.map(|d| d.as_nanos()).unwrap_or_default(),
        p.to_path_buf(),
    )
}

/// Bytes in regular files under `p` (symbolic links not followed).
fn dir_size(p: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![p.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.filter_map(Result::ok) {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => total += e.metadata().map(|m| m.len()).unwrap_or(0),
                _ => {}
            }
        }
    }
    total
}

/// An archive made at `t` of data of `cluster` and `epoch` whose log ends
/// at `last`, for tests: real files, archived by [`LocalPaths::archive`].
#[cfg(test)]
pub(crate) fn test_archive(p: &LocalPaths, t: u64, cluster: u64, epoch: u64, last: u64) -> PathBuf {
    let entries: Vec<u64> = (1..=last).collect();
    super::held::write_test_segment(&p.member_dir().join("wal"), 0, 0, &entries);
    std::fs::create_dir_all(p.member_dir().join("snap")).unwrap();
    std::fs::write(
        p.member_dir().join("snap/db"),
        format!("{cluster}/{epoch}/{last}"),
    )
    .unwrap();
    p.write_state(&StateFile {
        cluster_id: Some(cluster),
        epoch,
        formed: true,
        ..StateFile::default()
    })
    .unwrap();
    let dest = p.archive("stale data", t).unwrap();
    super::local::record_checksum(&dest, None).unwrap();
    dest
}

#[cfg(test)]
mod tests {
    use super::super::local::record_checksum;
    use super::*;

    fn paths(t: &Path) -> LocalPaths {
        LocalPaths {
            data_dir: t.join("data"),
            state_file: t.join("state/failover.json"),
            run_dir: t.join("run"),
            archive_dir: t.join("archive"),
        }
    }

    /// Make an archive at `t` whose db holds `content`.
    fn archive_at(p: &LocalPaths, t: u64, content: &[u8]) -> PathBuf {
        std::fs::create_dir_all(p.member_dir().join("snap")).unwrap();
        std::fs::write(p.member_dir().join("snap/db"), content).unwrap();
        let dest = p.archive("stale data", t).unwrap();
        record_checksum(&dest, None).unwrap();
        dest
    }

    #[test]
    fn retention_zero_keeps_every_archive() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        for i in 0..4 {
            archive_at(&p, 1000 + i, b"x");
        }
        assert!(p.prune_archives(0).unwrap().is_empty());
        assert_eq!(p.archives().len(), 4);
    }

    #[test]
    fn retention_removes_only_the_oldest_of_its_own_archives() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        let made: Vec<PathBuf> = (0..4).map(|i| archive_at(&p, 1000 + i, b"x")).collect();
        // An operator's copy and a directory without the daemon's checksum
        // are never counted nor removed, even when older.
        let operator = p.archive_dir.join("before-upgrade");
        std::fs::create_dir_all(operator.join("member")).unwrap();
        let no_sum = p.archive_dir.join("999-hand-made");
        std::fs::create_dir_all(no_sum.join("member")).unwrap();

        let removed = p.prune_archives(2).unwrap();
        assert_eq!(removed, made[..2].to_vec());
        for r in &removed {
            assert!(!r.exists(), "{}", r.display());
        }
        let left = p.archives();
        assert!(
            left.contains(&made[2]) && left.contains(&made[3]),
            "{left:?}"
        );
        assert!(
            left.contains(&operator) && left.contains(&no_sum),
            "{left:?}"
        );
        assert!(std::fs::read_dir(&p.archive_dir).unwrap().all(|e| {
            !e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(PRUNING_PREFIX)
        }));
        // Within the limit: nothing more.
        assert!(p.prune_archives(2).unwrap().is_empty());
        assert_eq!(p.archives().len(), 4);
    }

    #[test]
    fn retention_keeps_the_newest_of_two_archives_of_the_same_second() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        let first = archive_at(&p, 2000, b"old");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = archive_at(&p, 2000, b"new");
        assert_eq!(p.archives(), vec![first.clone(), second.clone()]);
        assert_eq!(p.prune_archives(1).unwrap(), vec![first]);
        assert_eq!(
            std::fs::read(second.join("member/snap/db")).unwrap(),
            b"new"
        );
    }

    #[test]
    fn an_interrupted_removal_is_finished_and_is_no_archive_meanwhile() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        let kept = archive_at(&p, 1000, b"x");
        let doomed = p.archive_dir.join(format!("{PRUNING_PREFIX}900-stale"));
        std::fs::create_dir_all(doomed.join("member")).unwrap();
        assert_eq!(p.archives(), vec![kept.clone()]);
        assert!(p.prune_archives(1).unwrap().is_empty());
        assert!(!doomed.exists());
        assert_eq!(p.archives(), vec![kept]);
    }

    #[test]
    fn archive_infos_show_reason_time_and_size() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        let dest = archive_at(&p, 1234, b"abcdef");
        let infos = p.archive_infos();
        assert_eq!(infos.len(), 1);
        let i = &infos[0];
        assert_eq!(i.path, dest);
        assert_eq!(i.reason.as_deref(), Some("stale data"));
        assert_eq!(i.created_unix, Some(1234));
        assert!(i.made_by_warden);
        // The db, the checksum line, the reason (and no state file here).
        assert!(i.size_bytes >= 6 + 64, "{}", i.size_bytes);
        assert!(warden_archive_name("1234-stale-data"));
        assert!(warden_archive_name("1234-1"));
        assert!(!warden_archive_name("before-upgrade"));
        assert!(!warden_archive_name("1234_x"));
    }

    #[test]
    fn a_clock_stepped_back_orders_and_prunes_by_the_data() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        // Made in this order while the clock went back: the newest data
        // has the oldest name.
        let older_epoch = test_archive(&p, 5000, 7, 2, 900);
        let shorter_log = test_archive(&p, 4000, 7, 3, 200);
        let newest = test_archive(&p, 3000, 7, 3, 500);
        assert_eq!(
            std::fs::read_to_string(newest.join("raft-index")).unwrap(),
            "500\n"
        );
        let order = vec![older_epoch.clone(), shorter_log.clone(), newest.clone()];
        assert_eq!(p.archives(), order);
        // Read from the data when the archive recorded no index.
        std::fs::remove_file(shorter_log.join("raft-index")).unwrap();
        std::fs::remove_file(older_epoch.join("raft-index")).unwrap();
        assert_eq!(p.archives(), order);
        let infos = p.archive_infos();
        assert_eq!(infos[1].raft_index, Some(200));
        assert_eq!(infos[1].epoch, Some(3));
        assert_eq!(p.newest_archive(Some(7)).unwrap().path, newest);
        assert_eq!(p.newest_archive(None).unwrap().path, newest);

        assert_eq!(
            p.prune_archives_at(1, 100_000).unwrap(),
            vec![older_epoch, shorter_log]
        );
        assert_eq!(p.archives(), vec![newest]);
    }

    #[test]
    fn an_unconfirmed_force_counts_as_its_epoch() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        let forced = test_archive(&p, 1000, 7, 3, 10);
        let mut st: StateFile =
            serde_json::from_slice(&std::fs::read(forced.join("state.json")).unwrap()).unwrap();
        st.pending_epoch = Some(5);
        std::fs::write(forced.join("state.json"), serde_json::to_vec(&st).unwrap()).unwrap();
        let later = test_archive(&p, 2000, 7, 4, 90);
        assert_eq!(p.archives(), vec![later, forced]);
    }

    #[test]
    fn pruning_keeps_a_recent_archive_and_the_newest_of_the_current_cluster() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        let old_cluster = test_archive(&p, 1000, 1, 5, 100);
        let behind = test_archive(&p, 2000, 2, 1, 50);
        let current = test_archive(&p, 3000, 2, 1, 80);
        // Just made, of data older than all of them.
        let just_made = test_archive(&p, 9000, 2, 0, 10);
        p.update_state(|s| s.cluster_id = Some(2)).unwrap();
        assert_eq!(
            p.archives(),
            vec![
                just_made.clone(),
                behind.clone(),
                current.clone(),
                old_cluster.clone()
            ]
        );
        let now = 9000 + PRUNE_GRACE_SECS - 1;
        assert_eq!(p.prune_archives_at(1, now).unwrap(), vec![behind]);
        assert_eq!(
            p.archives(),
            vec![just_made.clone(), current.clone(), old_cluster.clone()]
        );
        // Once past the grace, the just-made archive goes; the newest of the
        // cluster the state file names and the newest of all stay.
        assert_eq!(p.prune_archives_at(1, now + 1).unwrap(), vec![just_made]);
        // A time ahead of the clock (stepped back since) is recent too.
        let ahead = test_archive(&p, 50_000, 2, 0, 5);
        p.update_state(|s| s.cluster_id = Some(2)).unwrap();
        assert!(p.prune_archives_at(1, 20_000).unwrap().is_empty());
        assert_eq!(p.archives(), vec![ahead, current, old_cluster]);
    }
}
