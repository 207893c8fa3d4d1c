//! The resolutions of `etcd-warden recover` (the one command a refusal
//! names): what each does on this node ([`plan`]) and doing it ([`apply`]).
//! The daemon runs them for `POST /v1/recover` under its one-pass-at-a-time
//! lock, so that no failover pass or agent action acts on the files while
//! they change; the CLI runs them itself only when the daemon is not
//! running. Nothing is ever deleted: data is moved into the archive
//! directory.

mod in_daemon;
mod restore;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use warden_api::{RecoverRequest, RecoverWhat};

use crate::config::Settings;
use crate::reconcile::archives::Held;
use crate::reconcile::local::{LocalPaths, StateFile};
use crate::reconcile::revision_step::UNKNOWN_LOSS_REVISIONS;
#[cfg(test)]
use restore::RestoreTool;
#[cfg(test)]
use restore::logged_id;
pub(crate) use restore::{RestoreSource, SnapshotRestore, find_etcd_tool, find_restore_tool};
use restore::{fresh_token, restore_snapshot, revision_step};

/// `node` must be one of the configured nodes.
pub(crate) fn check_node(settings: &Settings, node: &str) -> anyhow::Result<()> {
    if settings.nodes.iter().any(|n| n.name == node) {
        return Ok(());
    }
    bail!(
        "--node {node}: not a configured node (configured: {})",
        settings
            .nodes
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// This node's etcd as the configuration names it.
pub(crate) fn local_etcd(settings: &Settings) -> LocalEtcd {
    LocalEtcd {
        binary: settings.etcd.binary.clone(),
        peer_urls: settings.local_node().peer_urls.clone(),
        forces: settings.topology == crate::config::settings::Topology::TwoNode,
        owner: settings
            .etcd
            .user
            .drops()
            .then_some((settings.etcd.user.uid, settings.etcd.user.gid)),
    }
}

/// What a resolution does on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RecoverAction {
    /// Set the in-sync marker for this boot.
    MarkInSync,
    /// Raise the data's epoch by one.
    RaiseEpoch,
    /// Move the local member directory into the archive directory.
    Archive,
    /// Move this archive back in place, then what its first start needs.
    Restore {
        /// The archive.
        archive: PathBuf,
        /// What the restored data's first start needs.
        then: AfterRestore,
        /// The epoch the restored data gets when it is older than the state
        /// file names (`--allow-older-epoch`: no data of that epoch is left).
        raise_epoch: Option<u64>,
        /// etcd's uid and gid (see [`LocalEtcd::owner`]).
        owner: Option<(u32, u32)>,
    },
    /// Restore a snapshot as a new one-member cluster.
    RestoreSnapshot(SnapshotRestore),
}

/// What this node's etcd is: the binary (the restore tools are looked for
/// beside it) and its peer URLs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LocalEtcd {
    /// The configured etcd binary.
    pub(crate) binary: PathBuf,
    /// This node's peer URLs.
    pub(crate) peer_urls: Vec<String>,
    /// The topology forces new clusters (two nodes with fencing); an HA or
    /// arbiter cluster never does: its majority decides.
    pub(crate) forces: bool,
    /// The uid and gid etcd runs as, when not the daemon's: a data
    /// directory a restore creates is given to them, as the daemon's start
    /// creates it.
    pub(crate) owner: Option<(u32, u32)>,
}

/// Creates the data directory `0700` when it is missing (its volume
/// replaced, or moved away), owned by etcd's user as the daemon's start
/// creates it: etcd must be able to enter it.
pub(crate) fn make_data_dir(paths: &LocalPaths, owner: Option<(u32, u32)>) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if paths.data_dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&paths.data_dir)
        .with_context(|| format!("cannot create {}", paths.data_dir.display()))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&paths.data_dir, Some(uid), Some(gid))
            .with_context(|| format!("cannot give {} to etcd's user", paths.data_dir.display()))?;
    }
    Ok(())
}

/// The highest epoch known on this node: the state file's and those of the
/// archives' state files, a forced restart's epoch not yet seen done
/// included.
fn highest_epoch(paths: &LocalPaths) -> anyhow::Result<u64> {
    let mut top = paths.read_state()?.may_hold_epoch();
    for a in paths.archives() {
        if let Some(s) = archived_state(&a) {
            top = top.max(s.may_hold_epoch());
        }
    }
    Ok(top)
}

/// Refuses to restore an archive whose data is of an older epoch than the
/// state file names: writing its state over it would make older data look
/// current, and newer data of the peer stale.
fn no_older_epoch(
    src: &Path,
    held: &Held,
    st: &StateFile,
    state_file: &Path,
) -> anyhow::Result<()> {
    let named = st.may_hold_epoch();
    if held.epoch >= named {
        return Ok(());
    }
    bail!(
        "{} holds data of epoch {}, but {} names epoch {named}: restoring it would write the older epoch over the newer one, and data of epoch {named} elsewhere would then look stale; restore an archive of epoch {named} or later (`etcd-warden status` lists each archive's epoch), or, once no data of epoch {named} exists anywhere, add --allow-older-epoch",
        src.display(),
        held.epoch,
        state_file.display()
    )
}

/// An archive's data in a plan line.
fn describe_held(h: &Held) -> String {
    let cluster = h
        .cluster_id
        .map_or_else(|| "unknown".to_owned(), |c| format!("{c:x}"));
    let index = h
        .raft_index
        .map_or_else(|| "unknown".to_owned(), |i| i.to_string());
    format!("cluster {cluster}, epoch {}, raft index {index}", h.epoch)
}

/// The plan: the action and its description.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The action.
    pub(crate) action: RecoverAction,
    /// Human-readable lines.
    pub(crate) describe: Vec<String>,
    /// The local etcd must not run.
    pub(crate) needs_etcd_stopped: bool,
    /// The daemon stops its etcd first (a learner that has no leader,
    /// which serves nothing).
    pub(crate) stops_etcd: bool,
}

/// What `what` means on node `me`.
pub(crate) fn plan(
    req: &RecoverRequest,
    me: &str,
    paths: &LocalPaths,
    etcd: &LocalEtcd,
) -> anyhow::Result<Plan> {
    let node = req.node.as_str();
    match req.what {
        RecoverWhat::ForceNewCluster => {
            must_be_me("force-new-cluster", node, me)?;
            force_new_cluster_plan(me, paths, etcd)
        }
        RecoverWhat::KeepDataOf if node == me => raise_epoch_plan(me, paths),
        RecoverWhat::KeepDataOf => archive_plan(node, me, paths),
        RecoverWhat::RestoreArchive => {
            must_be_me("restore-archive", node, me)?;
            restore_archive_plan(req, me, paths, etcd)
        }
        RecoverWhat::RestoreSnapshot => {
            let snapshot = req
                .snapshot
                .as_ref()
                .context("restore-snapshot needs the snapshot file")?;
            must_be_me("restore-snapshot", node, me)?;
            restore_snapshot_plan(snapshot, me, paths, etcd)
        }
    }
}

/// A resolution that acts on the node whose data is used runs there.
fn must_be_me(verb: &str, node: &str, me: &str) -> anyhow::Result<()> {
    if node != me {
        bail!("{verb} acts on the node whose data is used: run it on {node}, not on {me}");
    }
    Ok(())
}

/// `force-new-cluster` on this node: mark its data in sync, so that the
/// daemon forces from it once the peer is proven down; a learner's data
/// takes its own plan.
fn force_new_cluster_plan(me: &str, paths: &LocalPaths, etcd: &LocalEtcd) -> anyhow::Result<Plan> {
    if !paths.has_data() {
        bail!(
            "{me} has no etcd data in {}: nothing to force a cluster from",
            paths.data_dir.display()
        );
    }
    let st = paths.read_state()?;
    if learners_data(&st, me) {
        if !etcd.forces {
            bail!(
                "{me}'s data is a learner's, and this cluster's topology never forces a new cluster: its majority decides, and its leader promotes the learner once it is in sync"
            );
        }
        return learner_plan(me, paths, etcd, &st);
    }
    Ok(Plan {
        action: RecoverAction::MarkInSync,
        describe: vec![
            format!("mark {me}'s data as holding every acknowledged write for this boot ({})", paths.run_dir.join("in-sync").display()),
            "let the daemon force a new one-member cluster from it once Pacemaker shows the peer down, or once the peer's daemon says it holds no data (its data gone, or a new or replaced machine with neither data nor a state file), or that its data shows its own removal committed (a leave the local member's persisted commit index predates)".into(),
            "after a total outage Corosync holds quorum back until the peer was seen (wait_for_all): if the peer stays off, lift that yourself with `pcs quorum unblock`, so that Pacemaker fences the peer and starts etcd here".into(),
            format!(
                "the forced restart holds clients off until it has moved the revision on by {} and compacted the history below: the writes only the peer holds are lost, and their revisions are not handed out again unless the peer acknowledged more than that many since this data's last write",
                UNKNOWN_LOSS_REVISIONS
            ),
            "the peer, when it returns, archives its data and rejoins as a learner".into(),
        ],
        needs_etcd_stopped: false,
        stops_etcd: false,
    })
}

/// `keep-data-of` this node: raise its data's epoch above the other's.
fn raise_epoch_plan(me: &str, paths: &LocalPaths) -> anyhow::Result<Plan> {
    let st = paths.read_state()?;
    Ok(Plan {
        action: RecoverAction::RaiseEpoch,
        describe: vec![format!(
            "raise the epoch of {me}'s data from {} to {} in {}, so that the other node's data is stale and is archived",
            st.epoch,
            st.may_hold_epoch() + 1,
            paths.state_file.display()
        )],
        needs_etcd_stopped: false,
        stops_etcd: false,
    })
}

/// `keep-data-of` another node: archive this node's data, so that it
/// rejoins `node`'s cluster.
fn archive_plan(node: &str, me: &str, paths: &LocalPaths) -> anyhow::Result<Plan> {
    if !paths.has_data() {
        bail!(
            "{me} has no etcd data in {}: nothing to archive",
            paths.data_dir.display()
        );
    }
    Ok(Plan {
        action: RecoverAction::Archive,
        describe: vec![format!(
            "move {me}'s member directory {} into {} (with its SHA-256; nothing deleted), so that {me} rejoins {node}'s cluster as a learner",
            paths.member_dir().display(),
            paths.archive_dir.display()
        )],
        needs_etcd_stopped: true,
        stops_etcd: false,
    })
}

/// `restore-archive`: move an archived member directory back (the newest
/// of this data's cluster unless one is named).
fn restore_archive_plan(
    req: &RecoverRequest,
    me: &str,
    paths: &LocalPaths,
    etcd: &LocalEtcd,
) -> anyhow::Result<Plan> {
    if paths.has_data() {
        bail!(
            "{me} already has data in {}: archive it first (keep-data-of)",
            paths.member_dir().display()
        );
    }
    let st = paths.read_state()?;
    let src = match &req.archive {
        Some(a) => a.clone(),
        None => paths
            .newest_archive(st.cluster_id)
            .map(|a| a.path)
            .with_context(|| format!("no archive in {}", paths.archive_dir.display()))?,
    };
    if !src.join("member").is_dir() {
        bail!("{} holds no member directory", src.display());
    }
    let held = Held::of(&src);
    if !req.allow_older_epoch {
        no_older_epoch(&src, &held, &st, &paths.state_file)?;
    }
    let archived = archived_state(&src);
    if let Some(a) = archived.as_ref().filter(|a| runs_not_alone(a, me)) {
        return archived_learner_plan(me, paths, etcd, &src, &held, a);
    }
    let then = after_restore_of(archived.as_ref(), me, etcd.forces);
    let raise_epoch = (held.epoch < st.may_hold_epoch())
        .then(|| highest_epoch(paths).map(|e| e + 1))
        .transpose()?;
    // A member directory without a log (a join or reseed that
    // received no data) is not data, but it is in the way.
    let leftover = paths.member_dir().exists().then(|| {
        format!(
            "move {} (no write-ahead log: a join that received no data) into {} first (nothing deleted)",
            paths.member_dir().display(),
            paths.archive_dir.display()
        )
    });
    Ok(Plan {
        describe: leftover
            .into_iter()
            .chain([format!(
                "move {} ({}) back to {} and restore its state file",
                src.join("member").display(),
                describe_held(&held),
                paths.member_dir().display()
            )])
            .chain(raise_epoch.map(|e| {
                format!(
                    "give the restored data epoch {e} (above every epoch known here): its own, {}, is older than the {} that {} names, whose data --allow-older-epoch says is gone, and would make it look stale",
                    held.epoch,
                    st.may_hold_epoch(),
                    paths.state_file.display()
                )
            }))
            .chain(restore_archive_follow_up(me, then))
            .collect(),
        action: RecoverAction::Restore {
            archive: src,
            then,
            raise_epoch,
            owner: etcd.owner,
        },
        needs_etcd_stopped: true,
        stops_etcd: false,
    })
}

/// `restore-snapshot`: restore a snapshot file as a new one-member
/// cluster of this node, archiving any data it holds first.
fn restore_snapshot_plan(
    snapshot: &Path,
    me: &str,
    paths: &LocalPaths,
    etcd: &LocalEtcd,
) -> anyhow::Result<Plan> {
    let size = crate::snapshot_file::verify_file(snapshot)?;
    if etcd.peer_urls.is_empty() {
        bail!("{me} has no peer URLs in the configuration");
    }
    let restore = new_restore(
        RestoreSource::Snapshot(snapshot.to_path_buf()),
        me,
        paths,
        etcd,
    )?;
    let epoch = restore.epoch;
    let archive = restore.archive_first.then(|| {
        format!(
            "move {me}'s member directory {} into {} (with its SHA-256; nothing deleted)",
            paths.member_dir().display(),
            paths.archive_dir.display()
        )
    });
    Ok(Plan {
        describe: archive.into_iter().chain([
            format!(
                "restore {} ({size} bytes, checksum verified) with {} into {} as a new one-member cluster of {me} (peer URLs {}, cluster token {})",
                snapshot.display(),
                restore.tool.path().display(),
                paths.member_dir().display(),
                restore.peer_urls.join(","),
                restore.token
            ),
            restore.revision.describe(),
            format!(
                "write {} with epoch {epoch} (above every epoch known here), so that the other node's data is stale: it is archived (not deleted) when that node rejoins, as a learner",
                paths.state_file.display()
            ),
            "every write made after the snapshot was taken is lost; start etcd afterwards (`pcs resource clear <etcd clone> <node>`, with crmsh `crm resource clear <etcd clone> <node>`)".into(),
        ]).collect(),
        action: RecoverAction::RestoreSnapshot(restore),
        needs_etcd_stopped: true,
        stops_etcd: false,
    })
}

/// Carry out `action`, telling `progress` about long steps; returns what
/// was done.
pub(crate) fn apply(
    action: &RecoverAction,
    paths: &LocalPaths,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<Vec<String>> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    Ok(match action {
        RecoverAction::MarkInSync => {
            let boot = paths.boot_id()?;
            paths.mark_in_sync_by_operator(&boot)?;
            vec![format!("in-sync marker set for boot {boot}")]
        }
        RecoverAction::RaiseEpoch => {
            let st = paths.update_state(|s| {
                s.epoch = s.may_hold_epoch() + 1;
                s.pending_epoch = None;
            })?;
            vec![format!("epoch is now {}", st.epoch)]
        }
        RecoverAction::Archive => archive(paths, "operator: keep the peer's data", now)?.1,
        RecoverAction::Restore {
            archive: src,
            then,
            raise_epoch,
            owner,
        } => {
            let mut done = Vec::new();
            if paths.has_data() {
                bail!(
                    "{} holds data now: archive it first (keep-data-of)",
                    paths.member_dir().display()
                );
            }
            if paths.member_dir().exists() {
                done = archive(paths, "operator: a member directory without a log", now)?.1;
            }
            make_data_dir(paths, *owner)?;
            std::fs::rename(src.join("member"), paths.member_dir())
                .with_context(|| format!("cannot move {} back", src.join("member").display()))?;
            if let Ok(state) = std::fs::read(src.join("state.json")) {
                crate::reconcile::local::write_durably(&paths.state_file, &state)?;
            }
            done.push(format!(
                "restored {} (its checksum file stays in {})",
                paths.member_dir().display(),
                src.display()
            ));
            if let Some(e) = raise_epoch {
                paths.update_state(|s| {
                    s.epoch = *e;
                    s.pending_epoch = None;
                })?;
                done.push(format!("epoch is now {e}"));
            }
            done.extend(after_restore(paths, *then)?);
            done
        }
        RecoverAction::RestoreSnapshot(r) => {
            let why = match r.source {
                RestoreSource::Snapshot(_) => "operator: restore a snapshot",
                _ => "operator: a new cluster from a learner's data",
            };
            match &r.source {
                RestoreSource::OwnBackend => {
                    restore::backend_holds_the_log(&paths.member_dir())?;
                }
                RestoreSource::ArchivedBackend(db) => {
                    if let Some(member) = db.parent().and_then(Path::parent) {
                        restore::backend_holds_the_log(member)?;
                    }
                }
                RestoreSource::Snapshot(_) => {}
            }
            let (archived, mut done) = if r.archive_first {
                let (dest, done) = archive(paths, why, now)?;
                (Some(dest), done)
            } else {
                (None, Vec::new())
            };
            let file = match (&r.source, archived) {
                (RestoreSource::Snapshot(f), _) => f.clone(),
                (RestoreSource::ArchivedBackend(db), _) => db.clone(),
                (RestoreSource::OwnBackend, Some(dest)) => backend_of(&dest),
                (RestoreSource::OwnBackend, None) => {
                    bail!("no member directory was archived to restore the backend of")
                }
            };
            done.extend(restore_snapshot(r, &file, paths, progress)?);
            done
        }
    })
}

/// Moves this node's member directory into the archive directory with its
/// checksum, for `why`: where it went, and what was done.
fn archive(paths: &LocalPaths, why: &str, now: u64) -> anyhow::Result<(PathBuf, Vec<String>)> {
    let dest = paths.archive(why, now)?;
    crate::reconcile::local::record_checksum(&dest, None)?;
    let done = vec![format!("archived to {}", dest.display())];
    Ok((dest, done))
}

/// The backend file of the data in `dir` (a data or archive directory).
fn backend_of(dir: &Path) -> PathBuf {
    dir.join("member").join("snap").join("db")
}

/// A restore of `source` as a new one-member cluster of `me`, its epoch
/// above every epoch known here.
fn new_restore(
    source: RestoreSource,
    me: &str,
    paths: &LocalPaths,
    etcd: &LocalEtcd,
) -> anyhow::Result<SnapshotRestore> {
    if etcd.peer_urls.is_empty() {
        bail!("{me} has no peer URLs in the configuration");
    }
    let tool = find_restore_tool(&etcd.binary)?;
    Ok(SnapshotRestore {
        revision: revision_step(&tool),
        source,
        tool,
        name: me.to_owned(),
        peer_urls: etcd.peer_urls.clone(),
        token: fresh_token()?,
        epoch: highest_epoch(paths)? + 1,
        archive_first: paths.has_data(),
        owner: etcd.owner,
    })
}

/// Whether the state file says this node's data is a learner's that has
/// not been a voter yet (a join started, or a cluster whose voters did not
/// list this node at the last quorate look). A state file written again
/// from the data's log knows no voters, and says nothing either way.
fn learners_data(st: &StateFile, me: &str) -> bool {
    !st.epoch_unknown
        && (st.joining || (st.cluster_id.is_some() && !st.voters.iter().any(|v| v == me)))
}

/// `force-new-cluster` on a learner's data: etcd cannot force a learner's
/// data into a cluster (it panics, "removed all voters"), so the newest
/// backend on this node (the learner's, or an archive's of the same
/// cluster that holds a later raft index) is restored as a new one-member
/// cluster, the learner's member directory archived first.
fn learner_plan(
    me: &str,
    paths: &LocalPaths,
    etcd: &LocalEtcd,
    st: &StateFile,
) -> anyhow::Result<Plan> {
    let own = Held {
        cluster_id: st.cluster_id,
        epoch: st.may_hold_epoch(),
        raft_index: crate::reconcile::held::last_index(&paths.member_dir()),
    };
    let key = |h: &Held| (h.epoch, h.raft_index.unwrap_or(0));
    let newer_archive = paths
        .newest_archive(st.cluster_id)
        .filter(|a| a.held.cluster_id == st.cluster_id && key(&a.held) > key(&own))
        .filter(|a| backend_of(&a.path).is_file());
    let (source, held, from) = match newer_archive {
        Some(a) => (
            RestoreSource::ArchivedBackend(backend_of(&a.path)),
            a.held,
            format!("the archive {}", a.path.display()),
        ),
        None => {
            if !backend_of(paths.data_dir.as_path()).is_file() {
                bail!(
                    "{me}'s data is a learner's, but {} holds no backend to restore: etcd cannot force a learner's data into a cluster",
                    backend_of(&paths.data_dir).display()
                );
            }
            (
                RestoreSource::OwnBackend,
                own,
                "the learner's data".to_owned(),
            )
        }
    };
    let restore = new_restore(source, me, paths, etcd)?;
    let whose = if st.departed {
        format!(
            "{me}'s data ends with its own removal from the member list (it left gracefully; its state file lists no voter {me}), and etcd cannot force the data of a member it no longer lists into a cluster"
        )
    } else {
        format!(
            "{me}'s data is a learner's that has not been a voter yet (its state file lists no voter {me}), and etcd cannot force a learner's data into a cluster"
        )
    };
    let describe = [
        format!("{whose}: the newest backend here is restored instead"),
        format!("stop etcd on {me} if it runs (a learner without a leader serves nothing)"),
        format!(
            "move {me}'s member directory {} into {} (with its SHA-256; nothing deleted)",
            paths.member_dir().display(),
            paths.archive_dir.display()
        ),
    ]
    .into_iter()
    .chain(backend_restore_lines(
        me,
        paths,
        &restore,
        &format!("the backend of {from} ({})", describe_held(&held)),
    ))
    .chain([
        "writes the lost voter acknowledged that the learner had not received are lost; the daemon starts etcd on the restored data where Pacemaker has it started".into(),
    ])
    .collect();
    Ok(Plan {
        action: RecoverAction::RestoreSnapshot(restore),
        describe,
        needs_etcd_stopped: false,
        stops_etcd: true,
    })
}

/// The state file an archive keeps beside its data, if it reads.
fn archived_state(archive: &Path) -> Option<StateFile> {
    let b = std::fs::read(archive.join("state.json")).ok()?;
    serde_json::from_slice(&b).ok()
}

/// Whether an archive's state file says its data cannot run as this
/// node's member: a departed member's (its log ends with its own removal),
/// a join's, or a learner's that voters other than this node added.
fn runs_not_alone(st: &StateFile, me: &str) -> bool {
    !st.epoch_unknown
        && (st.departed
            || st.joining
            || (!st.voters.is_empty() && !st.voters.iter().any(|v| v == me)))
}

/// The plan's lines of a backend restored as a new one-member cluster:
/// the restore, the revision move, the state file.
fn backend_restore_lines(
    me: &str,
    paths: &LocalPaths,
    restore: &SnapshotRestore,
    what: &str,
) -> [String; 3] {
    [
        format!(
            "restore {what} with {} as a new one-member cluster of {me} (peer URLs {}, cluster token {}); what etcd had not applied to its backend yet is not restored",
            restore.tool.path().display(),
            restore.peer_urls.join(","),
            restore.token
        ),
        restore.revision.describe(),
        format!(
            "write {} with epoch {} (above every epoch known here), so that any other data is stale: it is archived (not deleted) when its node rejoins, as a learner",
            paths.state_file.display(),
            restore.epoch
        ),
    ]
}

/// What a restored archive's first start needs, so that no revision the
/// lost writes had is handed out again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterRestore {
    /// Two-node data that lists the peer's member: it cannot run alone, so
    /// it is marked as the operator's choice for this boot (as
    /// `force-new-cluster` does) and the daemon forces a one-member cluster
    /// from it, moving the revision on by [`UNKNOWN_LOSS_REVISIONS`].
    ForceFromIt,
    /// One-member data of this node: its first start moves the revision on
    /// by [`UNKNOWN_LOSS_REVISIONS`] with clients held off.
    OweRevisions,
    /// Data of several voters that never forces (HA): it runs once a
    /// majority of its members does.
    Nothing,
}

/// What the restore of an archive with the state file `archived` needs.
fn after_restore_of(archived: Option<&StateFile>, me: &str, forces: bool) -> AfterRestore {
    let voters = archived.map(|a| a.voters.as_slice()).unwrap_or_default();
    if voters.iter().all(|v| v == me) {
        AfterRestore::OweRevisions
    } else if forces {
        AfterRestore::ForceFromIt
    } else {
        AfterRestore::Nothing
    }
}

/// What a restored archive's first start does, for the plan.
fn restore_archive_follow_up(me: &str, then: AfterRestore) -> Vec<String> {
    let mut lines = Vec::new();
    match then {
        AfterRestore::ForceFromIt => lines.push(format!(
            "mark {me}'s restored data as holding every acknowledged write for this boot (as `recover force-new-cluster --node {me}` does): it lists the peer's member, so the daemon forces a new one-member cluster from it once the peer's daemon says it holds no data, or Pacemaker shows the peer down, holding clients off until the revision is {UNKNOWN_LOSS_REVISIONS} past the data's, so that no revision the lost writes had is handed out again"
        )),
        AfterRestore::OweRevisions => lines.push(format!(
            "owe a move of the revision by {UNKNOWN_LOSS_REVISIONS}: etcd's first start of the restored data holds clients off until then, so that no revision the lost writes had is handed out again"
        )),
        AfterRestore::Nothing => {}
    }
    lines.push("start etcd afterwards (`pcs resource clear <etcd clone> <node>`, with crmsh `crm resource clear <etcd clone> <node>`); the other node then archives what it holds, if anything, and joins as a learner".into());
    lines
}

/// After an archive is back in place: the revision move owed, or the
/// operator's in-sync marker.
fn after_restore(paths: &LocalPaths, then: AfterRestore) -> anyhow::Result<Vec<String>> {
    Ok(match then {
        AfterRestore::ForceFromIt => {
            let boot = paths.boot_id()?;
            paths.mark_in_sync_by_operator(&boot)?;
            vec![format!(
                "in-sync marker set for boot {boot}: the daemon forces a new one-member cluster from the restored data, moving the revision on by {UNKNOWN_LOSS_REVISIONS}"
            )]
        }
        AfterRestore::OweRevisions => {
            let st = paths.update_state(|s| {
                let owed = s.revision_bump_owed.unwrap_or(0);
                s.revision_bump_owed = Some(owed.max(UNKNOWN_LOSS_REVISIONS));
            })?;
            vec![format!(
                "the first start moves the revision on by {}",
                st.revision_bump_owed.unwrap_or(UNKNOWN_LOSS_REVISIONS)
            )]
        }
        AfterRestore::Nothing => Vec::new(),
    })
}

/// `restore-archive` of an archive whose data is a learner's or ends with
/// its own removal (a node that left gracefully): etcd cannot run that
/// member alone, so its backend is restored as a new one-member cluster,
/// as `force-new-cluster` does for such data; the archive is left as it is.
fn archived_learner_plan(
    me: &str,
    paths: &LocalPaths,
    etcd: &LocalEtcd,
    src: &Path,
    held: &Held,
    archived: &StateFile,
) -> anyhow::Result<Plan> {
    let db = backend_of(src);
    if !db.is_file() {
        bail!(
            "{} holds no backend ({}): its data is a learner's or a departed member's, which etcd cannot run alone, and only its backend could be restored",
            src.display(),
            db.display()
        );
    }
    let mut restore = new_restore(RestoreSource::ArchivedBackend(db), me, paths, etcd)?;
    restore.archive_first = paths.member_dir().exists();
    let whose = if archived.departed {
        "ends with its own removal from the member list (the node left gracefully)"
    } else {
        "is a learner's that was never a voter"
    };
    let describe = [
        format!(
            "{} ({}) {whose}: etcd cannot run that member alone, so its backend is restored instead; the archive stays as it is",
            src.display(),
            describe_held(held)
        ),
    ]
    .into_iter()
    .chain(backend_restore_lines(me, paths, &restore, "that backend"))
    .chain([
        "start etcd afterwards (`pcs resource clear <etcd clone> <node>`, with crmsh `crm resource clear <etcd clone> <node>`)".into(),
    ])
    .collect();
    Ok(Plan {
        action: RecoverAction::RestoreSnapshot(restore),
        describe,
        needs_etcd_stopped: true,
        stops_etcd: false,
    })
}

#[cfg(test)]
mod tests;
