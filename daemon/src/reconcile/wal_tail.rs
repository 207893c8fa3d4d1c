//! A copy of etcd's write-ahead log, kept before a forced new cluster.
//!
//! `--force-new-cluster` drops every log entry past the commit index the
//! member persisted. A follower learns that an entry is committed only from
//! the leader's next message, so when the leader loses power right after
//! acknowledging a write, the survivor holds that write in its log but not
//! as committed, and the forced restart drops it. The copy keeps those
//! entries for an operator (`etcd-dump-logs` reads it from `DIR/member/wal`), never for a
//! decision: what a forced cluster serves is what etcd keeps.
//!
//! The newest segments are hard links, not copies: the entries past the
//! commit index are the last records written, etcd never rewrites a record
//! (a restart zeroes only the unused rest of the last segment and appends),
//! and a link costs nothing on the path from a fence to writes again. The
//! linked last segment goes on growing with what the forced member writes
//! after them; a segment etcd later removes stays here. Where a link is
//! impossible (another filesystem), the used part is copied.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::local::{LocalError, LocalPaths, io, sync_dir};

/// How many of the newest segments are copied: the last one, and the one
/// before in case a segment was cut just before the last records.
const SEGMENTS: usize = 2;

/// Links (or copies the used part of) the newest WAL segments of `paths`'
/// member directory into a new directory of the archive directory, named by
/// `epoch` and `now_unix`. `Ok(None)` when there is no WAL.
pub(super) fn keep(
    paths: &LocalPaths,
    epoch: u64,
    now_unix: u64,
) -> Result<Option<PathBuf>, LocalError> {
    let wal = paths.member_dir().join("wal");
    let Ok(rd) = std::fs::read_dir(&wal) else {
        return Ok(None);
    };
    let mut segments: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    if segments.is_empty() {
        return Ok(None);
    }
    // Segment names are "<seq>-<index>.wal" in hex of fixed width: their
    // order is the log's order.
    segments.sort();
    let dest = paths
        .archive_dir
        .join(format!("{now_unix}-wal-before-force-epoch-{epoch}"));
    // Not `member/wal`: a directory with `member/` in the archive directory
    // is an archive of whole data, one a restore may pick.
    let wal_dest = dest.join("wal");
    std::fs::create_dir_all(&wal_dest).map_err(io("cannot create", &wal_dest))?;
    for seg in segments.iter().rev().take(SEGMENTS) {
        let to = wal_dest.join(seg.file_name().unwrap_or_default());
        if std::fs::hard_link(seg, &to).is_err() {
            copy_used(seg, &to)?;
        }
    }
    let note = format!(
        "The newest write-ahead log segments of this node's etcd, kept (hard links, or copies \
         on another filesystem) just before it was restarted with --force-new-cluster (epoch \
         {epoch}). The forced restart drops log entries past the commit index this member had \
         persisted; they are kept here for inspection, nothing reads them back. The last \
         segment also holds what the forced member wrote after them. To read them, copy this \
         wal/ directory to DIR/member/wal and run etcd-dump-logs DIR.\n"
    );
    std::fs::write(dest.join("reason"), note).map_err(io("cannot write", &dest))?;
    sync_dir(&wal_dest)?;
    sync_dir(&dest)?;
    sync_dir(&paths.archive_dir)?;
    Ok(Some(dest))
}

/// Copies `from` up to its last non-zero byte (the preallocated rest is
/// zeros), durably.
fn copy_used(from: &Path, to: &Path) -> Result<(), LocalError> {
    let mut f = File::open(from).map_err(io("cannot open", from))?;
    let len = f.metadata().map_err(io("cannot stat", from))?.len();
    let end = used_len(&mut f, len).map_err(io("cannot read", from))?;
    f.seek(SeekFrom::Start(0))
        .map_err(io("cannot read", from))?;
    let mut out = File::create(to).map_err(io("cannot create", to))?;
    std::io::copy(&mut f.take(end), &mut out).map_err(io("cannot copy to", to))?;
    out.flush().map_err(io("cannot write", to))?;
    out.sync_all().map_err(io("cannot sync", to))
}

/// The length of `f` without its trailing zeros, read backwards in blocks.
fn used_len(f: &mut File, len: u64) -> std::io::Result<u64> {
    const BLOCK: u64 = 64 * 1024;
    let mut buf = vec![0u8; BLOCK as usize];
    let mut end = len;
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        let n = (end - start) as usize;
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut buf[..n])?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b != 0) {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_segments_are_kept() {
        let t = tempfile::tempdir().unwrap();
        let p = LocalPaths {
            data_dir: t.path().join("data"),
            state_file: t.path().join("state.json"),
            run_dir: t.path().join("run"),
            archive_dir: t.path().join("archive"),
        };
        assert_eq!(keep(&p, 2, 100).unwrap(), None, "no WAL, nothing kept");
        let wal = p.member_dir().join("wal");
        std::fs::create_dir_all(&wal).unwrap();
        for (name, used) in [
            ("0000000000000000-0000000000000000.wal", 10),
            ("0000000000000001-00000000000000a0.wal", 300),
            ("0000000000000002-0000000000000140.wal", 70_000),
        ] {
            let mut data = vec![7u8; used];
            data.resize(200_000, 0);
            std::fs::write(wal.join(name), data).unwrap();
        }
        std::fs::write(wal.join("0.tmp"), b"x").unwrap();
        let dest = keep(&p, 2, 100).unwrap().unwrap();
        assert!(dest.ends_with("100-wal-before-force-epoch-2"));
        let kept = dest.join("wal");
        assert!(p.archives().is_empty(), "a WAL copy is no archive of data");
        let mut names: Vec<String> = std::fs::read_dir(&kept)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "0000000000000001-00000000000000a0.wal",
                "0000000000000002-0000000000000140.wal"
            ]
        );
        // Links: the same files, at no cost.
        use std::os::unix::fs::MetadataExt;
        for n in &names {
            let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
            assert_eq!(ino(&kept.join(n)), ino(&wal.join(n)), "{n}");
        }
        // The member directory itself is untouched.
        assert!(wal.join("0000000000000000-0000000000000000.wal").exists());
    }

    #[test]
    fn a_copy_holds_the_used_part_only() {
        let t = tempfile::tempdir().unwrap();
        let (from, to) = (t.path().join("a.wal"), t.path().join("b.wal"));
        let mut data = vec![7u8; 70_000];
        data.resize(200_000, 0);
        std::fs::write(&from, data).unwrap();
        copy_used(&from, &to).unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), vec![7u8; 70_000]);
    }
}
