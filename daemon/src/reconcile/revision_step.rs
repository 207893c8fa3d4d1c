//! How far a forced restart moves the revision on: past what its own log's
//! tail shows it drops, past what an interrupted force left owed, and, when
//! the force rests on an operator's word, past what the other side may have
//! acknowledged that this data never saw.

use super::local::{LocalError, LocalPaths};

/// Revisions moved past when a force or a restore loses writes of unknown
/// count: an operator's `recover force-new-cluster` (its in-sync marker
/// stands in for a proof the daemon did not find: a peer whose lost disk,
/// or whose data while this node lagged, may hold writes this data lacks),
/// and a restore whose tool cannot move the revision (etcd before 3.5.10).
/// Through etcd's API every revision is one put, so this is what the step
/// affords within a start (docs/benchmarks.md has its cost), not a bound
/// on what the other side acknowledged.
pub(crate) const UNKNOWN_LOSS_REVISIONS: u64 = 100_000;

/// What a forced restart of the local data moves the revision past:
/// its log's tail, a debt an interrupted force left (this log may no
/// longer show the entries that force dropped: its restart appended to
/// it), and [`UNKNOWN_LOSS_REVISIONS`] when the operator marked the data in
/// sync.
pub(super) fn force_at_risk(
    paths: &LocalPaths,
    stopped_gracefully: bool,
) -> Result<u64, LocalError> {
    let owed = paths.read_state()?.revision_bump_owed.unwrap_or(0);
    let tail = revisions_at_risk(paths, stopped_gracefully);
    let by_operator = paths.valid_in_sync_marker().is_some_and(|m| m.operator);
    let unknown = if by_operator {
        tracing::warn!(
            revisions = UNKNOWN_LOSS_REVISIONS,
            "the operator marked this data in sync: the other side may have acknowledged writes it lacks, in a number nothing here shows; moving the revision past that many"
        );
        UNKNOWN_LOSS_REVISIONS
    } else {
        0
    };
    Ok(tail.max(owed).max(unknown))
}

/// How many revisions a peer may have acknowledged that a forced restart
/// of the local data drops (see [`super::held::ForceDrop`]). A log that
/// cannot be read gives [`UNREAD_TAIL_REVISIONS`]: unknown is not none.
fn revisions_at_risk(paths: &LocalPaths, stopped_gracefully: bool) -> u64 {
    match super::held::force_drop(&paths.member_dir()) {
        Some(d) => {
            let n = d.revisions_at_risk(stopped_gracefully);
            let applied =
                super::backend_index::consistent_index(&paths.member_dir().join("snap/db"));
            tracing::info!(
                entries_past_commit = d.entries,
                led = d.led,
                stopped_gracefully,
                commit = d.commit,
                backend_applied = ?applied,
                at_risk = n,
                "read the log entries the forced restart drops"
            );
            // A backend ahead of the persisted commit (or one that cannot be
            // read) needs the held start: it ends in a snapshot from which
            // a joining member is sent the backend, never the log this
            // backend skipped entries of (see `conf::snapshot_count`).
            // One revision at risk routes the force through it.
            match applied {
                Ok(a) if a <= d.commit => n,
                _ => n.max(1),
            }
        }
        None => {
            tracing::warn!(
                "cannot read the write-ahead log's tail; assuming {UNREAD_TAIL_REVISIONS} revisions are at risk"
            );
            UNREAD_TAIL_REVISIONS
        }
    }
}

/// Revisions assumed at risk when the log's tail cannot be read: more than
/// etcd's raft keeps in flight (256 messages of entries batched under
/// load), few enough that moving past them takes well under a second.
const UNREAD_TAIL_REVISIONS: u64 = 1000;

/// The forced restart's revision step is done: nothing is owed.
pub(crate) fn clear(paths: &LocalPaths) -> Result<(), LocalError> {
    paths
        .update_state(|st| st.revision_bump_owed = None)
        .map(|_| ())
}
