//! Write-behind of a joining member's incoming snapshot.
//!
//! A member that joins a cluster whose log was compacted receives the
//! leader's whole database as a snapshot. etcd writes it to a temporary file
//! in `member/snap/` (named `tmp…`) and fsyncs that file once the last byte
//! is in. With the kernel's default dirty-page limits (a share of RAM, GBs
//! on a server) the whole database can sit in the page cache until then, and
//! the one fsync then writes all of it while the learner, and so its
//! promotion, waits: 1.4–2.5 s for 2 GiB on the test machine.
//!
//! While a joining member runs, a thread of its own asks the kernel every
//! [`POLL`] to start writing such a file back (`sync_file_range` with
//! `SYNC_FILE_RANGE_WRITE` only: start, never wait). The disk then works
//! while the data arrives, and etcd's fsync finds little left. Nothing is
//! written or changed here, and nothing waits on the disk: a file that cannot
//! be opened, or a kernel that refuses the call, leaves the work to etcd's
//! own fsync as before.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the snapshot directory is looked at and write-back asked for.
const POLL: Duration = Duration::from_millis(100);
/// How long the watch waits for a snapshot to begin: a leader whose log
/// still holds every entry the new member lacks sends those instead.
const FIRST_FILE_WITHIN: Duration = Duration::from_secs(120);
/// The longest watch, a bound for a transfer that never ends.
const AT_MOST: Duration = Duration::from_secs(30 * 60);

/// One watch at a time: a join retried while one runs adds nothing.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// How a watch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Every incoming file it wrote back was saved (renamed) by etcd.
    Saved,
    /// No snapshot began within the first wait.
    NoSnapshot,
    /// The snapshot directory went away (the member stopped and its data
    /// was archived).
    DirGone,
    /// The kernel refused to start write-back.
    Unsupported,
    /// The overall bound passed.
    TimedOut,
}

/// What a watch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Watch {
    /// How it ended.
    pub ended: Ended,
    /// Incoming snapshot files opened.
    pub files: usize,
    /// Write-back requests the kernel accepted.
    pub requests: u64,
}

/// Starts watching `data_dir`'s snapshot directory on a thread of its own,
/// unless a watch is running already.
pub(crate) fn watch_incoming(data_dir: &Path) {
    if RUNNING.swap(true, Ordering::SeqCst) {
        return;
    }
    let snap = data_dir.join("member").join("snap");
    let spawned = std::thread::Builder::new()
        .name("snapshot-writeback".into())
        .spawn(move || {
            // Cleared however the thread ends, a panic included.
            struct Done;
            impl Drop for Done {
                fn drop(&mut self) {
                    RUNNING.store(false, Ordering::SeqCst);
                }
            }
            let _done = Done;
            let started = Instant::now();
            let w = watch(&snap, POLL, FIRST_FILE_WITHIN, AT_MOST);
            if w.files > 0 {
                tracing::info!(
                    files = w.files,
                    requests = w.requests,
                    ended = ?w.ended,
                    took_ms = started.elapsed().as_millis() as u64,
                    "wrote the incoming snapshot back to disk while it arrived"
                );
            } else {
                tracing::debug!(ended = ?w.ended, "no incoming snapshot to write back");
            }
        });
    if let Err(e) = spawned {
        RUNNING.store(false, Ordering::SeqCst);
        tracing::warn!(error = %e, "no thread to write the incoming snapshot back; etcd's fsync does it");
    }
}

/// The watch itself, with its timings as arguments so that tests can run it
/// in milliseconds.
pub(crate) fn watch(
    snap: &Path,
    poll: Duration,
    first_within: Duration,
    at_most: Duration,
) -> Watch {
    let started = Instant::now();
    let mut open: HashMap<PathBuf, File> = HashMap::new();
    let mut w = Watch {
        ended: Ended::TimedOut,
        files: 0,
        requests: 0,
    };
    loop {
        let incoming = match std::fs::read_dir(snap) {
            Ok(rd) => rd
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("tmp"))
                .map(|e| e.path())
                .collect::<Vec<_>>(),
            // etcd creates the directory as it starts; once files were
            // seen, its absence means the data was moved away.
            Err(e) if e.kind() == io::ErrorKind::NotFound && w.files > 0 => {
                w.ended = Ended::DirGone;
                return w;
            }
            Err(_) => Vec::new(),
        };
        open.retain(|p, _| incoming.contains(p));
        if w.files > 0 && open.is_empty() && incoming.is_empty() {
            w.ended = Ended::Saved;
            return w;
        }
        for p in incoming {
            if open.contains_key(&p) {
                continue;
            }
            match File::open(&p) {
                Ok(f) => {
                    w.files += 1;
                    open.insert(p, f);
                }
                Err(e) => {
                    tracing::debug!(file = %p.display(), error = %e, "cannot open the incoming snapshot")
                }
            }
        }
        for (p, f) in &open {
            match start_writeback(f) {
                Ok(()) => w.requests += 1,
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ENOSYS | libc::EINVAL | libc::EPERM)
                    ) =>
                {
                    tracing::debug!(file = %p.display(), error = %e, "write-back refused");
                    w.ended = Ended::Unsupported;
                    return w;
                }
                // The file may have been renamed or removed in between.
                Err(e) => tracing::debug!(file = %p.display(), error = %e, "write-back failed"),
            }
        }
        let elapsed = started.elapsed();
        if w.files == 0 && elapsed >= first_within {
            w.ended = Ended::NoSnapshot;
            return w;
        }
        if elapsed >= at_most {
            return w;
        }
        std::thread::sleep(poll);
    }
}

/// Asks the kernel to start writing `f`'s dirty pages back, without waiting.
#[allow(unsafe_code)]
fn start_writeback(f: &File) -> io::Result<()> {
    // SAFETY: sync_file_range takes a descriptor and three integers and
    // touches no memory of this process; the descriptor is valid for the
    // whole call because `f` is borrowed across it.
    let r = unsafe { libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const MS: Duration = Duration::from_millis(1);

    /// Waits until this process holds `path` open (the watch has it).
    fn wait_open(path: &Path) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let held = std::fs::read_dir("/proc/self/fd")
                .expect("/proc/self/fd")
                .flatten()
                .any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l == path));
            if held {
                return;
            }
            assert!(Instant::now() < deadline, "{} never opened", path.display());
            std::thread::sleep(MS);
        }
    }

    #[test]
    fn writes_an_incoming_file_back_until_etcd_renames_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let snap = dir.path().join("member/snap");
        std::fs::create_dir_all(&snap).expect("mkdir");
        let tmp = snap.join("tmp123456");
        File::create(&tmp).expect("create");
        let s = snap.clone();
        let h = std::thread::spawn(move || watch(&s, 5 * MS, 10_000 * MS, 20_000 * MS));
        wait_open(&tmp);
        // etcd's writer, opened only now so that the descriptor waited for
        // above is the watch's.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&tmp)
            .expect("open");
        for _ in 0..20 {
            f.write_all(&[7u8; 64 * 1024]).expect("write");
            std::thread::sleep(5 * MS);
        }
        f.sync_all().expect("fsync");
        std::fs::rename(&tmp, snap.join("0000000000000010.snap.db")).expect("rename");
        let w = h.join().expect("watch thread");
        assert_eq!(w.ended, Ended::Saved);
        assert_eq!(w.files, 1);
        assert!(w.requests > 0, "{w:?}");
    }

    #[test]
    fn gives_up_when_no_snapshot_begins() {
        let dir = tempfile::tempdir().expect("tempdir");
        let snap = dir.path().join("member/snap");
        std::fs::create_dir_all(&snap).expect("mkdir");
        // etcd's own files in the directory are not incoming snapshots.
        File::create(snap.join("db")).expect("create");
        File::create(snap.join("0000000000000001-0000000000000010.snap")).expect("create");
        let w = watch(&snap, 5 * MS, 50 * MS, 10_000 * MS);
        assert_eq!(
            w,
            Watch {
                ended: Ended::NoSnapshot,
                files: 0,
                requests: 0
            }
        );
    }

    #[test]
    fn waits_for_the_directory_and_ends_when_the_data_is_moved_away() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("etcd");
        let snap = data.join("member/snap");
        let s = snap.clone();
        let h = std::thread::spawn(move || watch(&s, 5 * MS, 10_000 * MS, 20_000 * MS));
        std::fs::create_dir_all(&snap).expect("mkdir");
        let tmp = snap.join("tmp99");
        File::create(&tmp).expect("create");
        wait_open(&tmp);
        std::fs::rename(&data, dir.path().join("archived")).expect("rename");
        let w = h.join().expect("watch thread");
        assert_eq!(w.ended, Ended::DirGone);
        assert_eq!(w.files, 1);
    }
}
