//! Archiving this node's member directory: moved aside, never deleted (the
//! nothing-deleted rule), its database's checksum recorded on a thread of
//! its own.

use std::path::{Path, PathBuf};

use warden_failover::EtcdView;

use super::{Ctx, ExecReport, Fault};
use crate::clock::now_unix;
use crate::reconcile::local::record_checksum;

/// How fast an archive's checksum reads the archived database: a second per
/// 64 MiB, a small share of one core and of the disk.
const CHECKSUM_PACE: u64 = 64 << 20;

/// Move the member directory to an archive, unless etcd still runs on it;
/// nothing to do without data.
pub(super) fn archive_data_dir<P: ?Sized, E, S>(
    cx: &Ctx<'_, P, E, S>,
    reason: &str,
    report: &mut ExecReport,
) -> Result<(), Fault> {
    if matches!(cx.facts.etcd, EtcdView::Running(_)) {
        return Err(Fault::refused("etcd still runs on that data"));
    }
    if !cx.paths.has_data() {
        return Ok(());
    }
    let dest = cx.paths.archive(reason, now_unix())?;
    tracing::warn!(archive = %dest.display(), %reason, "archived the etcd member directory (nothing deleted)");
    crate::kill_point::reached("archive-done");
    if let Some(h) = spawn_checksum(&dest) {
        report.checksums.push(h);
    }
    report.archived.push(dest);
    Ok(())
}

/// Record the archive's checksum. It reads the whole database; the rejoin
/// goes on meanwhile (the moved data is no longer anyone's to write), and
/// the read is paced so that it leaves the disk and the CPU to the snapshot
/// transfer that usually follows.
///
/// A thread of its own, not the runtime's blocking pool: the daemon's exit
/// never waits for it (an archive whose checksum was cut off is still
/// whole, and the runbook says so). Without a thread it is computed now,
/// and there is nothing to wait for.
fn spawn_checksum(dest: &Path) -> Option<std::thread::JoinHandle<()>> {
    let at: PathBuf = dest.to_path_buf();
    let sum = move || checksum(&at);
    match std::thread::Builder::new()
        .name("archive-checksum".into())
        .spawn(sum.clone())
    {
        Ok(h) => Some(h),
        Err(e) => {
            tracing::warn!(error = %e, "no thread for the archive's checksum; computing it now");
            sum();
            None
        }
    }
}

/// Record the checksum of the archive at `at`, logging the outcome.
fn checksum(at: &Path) {
    let started = std::time::Instant::now();
    match record_checksum(at, Some(CHECKSUM_PACE)) {
        Ok(()) => tracing::info!(
            archive = %at.display(),
            took_ms = started.elapsed().as_millis() as u64,
            "recorded the archived database's checksum"
        ),
        Err(e) => {
            tracing::warn!(archive = %at.display(), error = %e, "could not record the archived database's checksum")
        }
    }
}
