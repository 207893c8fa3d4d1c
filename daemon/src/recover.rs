//! The resolutions of `etcd-warden recover` (the one command a refusal
//! names): what each does on this node ([`plan`]) and doing it ([`apply`]).
//! The daemon runs them for `POST /v1/recover` under its one-pass-at-a-time
//! lock, so that no failover pass or agent action acts on the files while
//! they change; the CLI runs them itself only when the daemon is not
//! running. Nothing is ever deleted: data is moved into the archive
//! directory.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use warden_api::{RecoverRequest, RecoverWhat};

use crate::config::Settings;
use crate::config::host::executable;
use crate::reconcile::archives::Held;
use crate::reconcile::local::{LocalPaths, StateFile};

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
    /// Move this archive back in place.
    Restore(PathBuf),
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
}

/// The tool that restores a snapshot into a data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RestoreTool {
    /// `etcdutl snapshot restore` (etcd 3.5 and later).
    Etcdutl(PathBuf),
    /// `etcdctl snapshot restore` (etcd 3.4; deprecated in 3.5).
    Etcdctl(PathBuf),
}

impl RestoreTool {
    fn path(&self) -> &Path {
        match self {
            Self::Etcdutl(p) | Self::Etcdctl(p) => p,
        }
    }
}

/// The first of etcd's tools `names` beside the etcd binary (the same
/// release), else on PATH; within one directory, in the order of `names`.
pub(crate) fn find_etcd_tool(etcd_binary: &Path, names: &[&str]) -> Option<PathBuf> {
    let beside = etcd_binary.parent().map(Path::to_path_buf);
    let path_dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    beside
        .into_iter()
        .chain(path_dirs)
        .flat_map(|d| names.iter().map(move |n| d.join(n)))
        .find(|p| executable(p))
}

/// The restore tool of the configured etcd: `etcdutl`, else `etcdctl`,
/// beside the etcd binary (the same release, so the restored data is in a
/// format that etcd reads), else on PATH.
pub(crate) fn find_restore_tool(etcd_binary: &Path) -> anyhow::Result<RestoreTool> {
    match find_etcd_tool(etcd_binary, &["etcdutl", "etcdctl"]) {
        Some(p) if p.ends_with("etcdutl") => Ok(RestoreTool::Etcdutl(p)),
        Some(p) => Ok(RestoreTool::Etcdctl(p)),
        None => bail!(
            "neither etcdutl nor etcdctl found beside {} or on PATH: install etcd's client tools (Debian: etcd-client)",
            etcd_binary.display()
        ),
    }
}

/// A planned snapshot restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SnapshotRestore {
    /// The snapshot file.
    pub(crate) snapshot: PathBuf,
    /// The tool that restores it.
    pub(crate) tool: RestoreTool,
    /// This node's member name.
    pub(crate) name: String,
    /// This node's peer URLs.
    pub(crate) peer_urls: Vec<String>,
    /// The new cluster's `initial-cluster-token`: fresh, so that the new
    /// cluster's and member's ids differ from the old ones.
    pub(crate) token: String,
    /// The epoch the restored data gets.
    pub(crate) epoch: u64,
    /// This node's member directory is moved into the archive directory
    /// first (nothing deleted).
    pub(crate) archive_first: bool,
}

/// A fresh random cluster token.
fn fresh_token() -> anyhow::Result<String> {
    let hex = crate::reconcile::local::random_hex(16)
        .context("cannot read /dev/urandom for a fresh cluster token")?;
    Ok(format!("etcd-warden-restore-{hex}"))
}

/// The highest epoch known on this node: the state file's and those of the
/// archives' state files, a forced restart's epoch not yet seen done
/// included.
fn highest_epoch(paths: &LocalPaths) -> anyhow::Result<u64> {
    let mut top = paths.read_state()?.may_hold_epoch();
    for a in paths.archives() {
        if let Ok(b) = std::fs::read(a.join("state.json"))
            && let Ok(s) = serde_json::from_slice::<StateFile>(&b)
        {
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
}

/// What `what` means on node `me`.
pub(crate) fn plan(
    req: &RecoverRequest,
    me: &str,
    paths: &LocalPaths,
    etcd: &LocalEtcd,
) -> anyhow::Result<Plan> {
    let node = req.node.as_str();
    let must_be_me = |verb: &str| -> anyhow::Result<()> {
        if node != me {
            bail!("{verb} acts on the node whose data is used: run it on {node}, not on {me}");
        }
        Ok(())
    };
    Ok(match req.what {
        RecoverWhat::ForceNewCluster => {
            must_be_me("force-new-cluster")?;
            if !paths.has_data() {
                bail!(
                    "{me} has no etcd data in {}: nothing to force a cluster from",
                    paths.data_dir.display()
                );
            }
            Plan {
                action: RecoverAction::MarkInSync,
                describe: vec![
                    format!("mark {me}'s data as holding every acknowledged write for this boot ({})", paths.run_dir.join("in-sync").display()),
                    "let the daemon force a new one-member cluster from it once Pacemaker shows the peer down, or once the peer's daemon says it holds no data (its data gone, or a new or replaced machine with neither data nor a state file), or that its data shows its own removal committed (a leave the local member's persisted commit index predates)".into(),
                    "after a total outage Corosync holds quorum back until the peer was seen (wait_for_all): if the peer stays off, lift that yourself with `pcs quorum unblock`, so that Pacemaker fences the peer and starts etcd here".into(),
                    "the peer, when it returns, archives its data and rejoins as a learner".into(),
                ],
                needs_etcd_stopped: false,
            }
        }
        RecoverWhat::KeepDataOf if node == me => {
            let st = paths.read_state()?;
            Plan {
                action: RecoverAction::RaiseEpoch,
                describe: vec![format!(
                    "raise the epoch of {me}'s data from {} to {} in {}, so that the other node's data is stale and is archived",
                    st.epoch,
                    st.may_hold_epoch() + 1,
                    paths.state_file.display()
                )],
                needs_etcd_stopped: false,
            }
        }
        RecoverWhat::KeepDataOf => {
            if !paths.has_data() {
                bail!(
                    "{me} has no etcd data in {}: nothing to archive",
                    paths.data_dir.display()
                );
            }
            Plan {
                action: RecoverAction::Archive,
                describe: vec![format!(
                    "move {me}'s member directory {} into {} (with its SHA-256; nothing deleted), so that {me} rejoins {node}'s cluster as a learner",
                    paths.member_dir().display(),
                    paths.archive_dir.display()
                )],
                needs_etcd_stopped: true,
            }
        }
        RecoverWhat::RestoreArchive => {
            must_be_me("restore-archive")?;
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
            Plan {
                describe: vec![format!(
                    "move {} ({}) back to {} and restore its state file",
                    src.join("member").display(),
                    describe_held(&held),
                    paths.member_dir().display()
                )],
                action: RecoverAction::Restore(src),
                needs_etcd_stopped: true,
            }
        }
        RecoverWhat::RestoreSnapshot => {
            let snapshot = req
                .snapshot
                .as_ref()
                .context("restore-snapshot needs the snapshot file")?;
            must_be_me("restore-snapshot")?;
            let size = crate::snapshot_file::verify_file(snapshot)?;
            if etcd.peer_urls.is_empty() {
                bail!("{me} has no peer URLs in the configuration");
            }
            let tool = find_restore_tool(&etcd.binary)?;
            let epoch = highest_epoch(paths)? + 1;
            let restore = SnapshotRestore {
                snapshot: snapshot.clone(),
                tool,
                name: me.to_owned(),
                peer_urls: etcd.peer_urls.clone(),
                token: fresh_token()?,
                epoch,
                archive_first: paths.has_data(),
            };
            let archive = restore.archive_first.then(|| {
                format!(
                    "move {me}'s member directory {} into {} (with its SHA-256; nothing deleted)",
                    paths.member_dir().display(),
                    paths.archive_dir.display()
                )
            });
            Plan {
                describe: archive.into_iter().chain([
                    format!(
                        "restore {} ({size} bytes, checksum verified) with {} into {} as a new one-member cluster of {me} (peer URLs {}, cluster token {})",
                        snapshot.display(),
                        restore.tool.path().display(),
                        paths.member_dir().display(),
                        restore.peer_urls.join(","),
                        restore.token
                    ),
                    format!(
                        "write {} with epoch {epoch} (above every epoch known here), so that the other node's data is stale: it is archived (not deleted) when that node rejoins, as a learner",
                        paths.state_file.display()
                    ),
                    "every write made after the snapshot was taken is lost; start etcd afterwards (`pcs resource clear <etcd clone> <node>`, with crmsh `crm resource clear <etcd clone> <node>`)".into(),
                ]).collect(),
                action: RecoverAction::RestoreSnapshot(restore),
                needs_etcd_stopped: true,
            }
        }
    })
}

/// The hex value of `"key":"…"` in etcd's JSON log lines.
fn logged_id(log: &str, key: &str) -> Option<u64> {
    let pat = format!("\"{key}\":\"");
    log.lines().find_map(|l| {
        let rest = &l[l.find(&pat)? + pat.len()..];
        let hex = &rest[..rest.find('"')?];
        u64::from_str_radix(hex, 16).ok().filter(|id| *id != 0)
    })
}

/// Give `p` and everything under it the owner of `like` (etcd may run as
/// another user than the operator who restores).
fn chown_like(p: &Path, like: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(like).with_context(|| format!("cannot stat {}", like.display()))?;
    let cur =
        std::fs::symlink_metadata(p).with_context(|| format!("cannot stat {}", p.display()))?;
    if cur.uid() == m.uid() && cur.gid() == m.gid() {
        return Ok(());
    }
    let mut todo = vec![p.to_path_buf()];
    while let Some(x) = todo.pop() {
        std::os::unix::fs::lchown(&x, Some(m.uid()), Some(m.gid()))
            .with_context(|| format!("cannot chown {}", x.display()))?;
        if std::fs::symlink_metadata(&x).is_ok_and(|m| m.is_dir()) {
            for e in
                std::fs::read_dir(&x).with_context(|| format!("cannot list {}", x.display()))?
            {
                todo.push(e?.path());
            }
        }
    }
    Ok(())
}

fn restore_snapshot(
    r: &SnapshotRestore,
    paths: &LocalPaths,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<Vec<String>> {
    // Checked again: the plan was made before the etcd check.
    if paths.has_data() {
        bail!(
            "{} appeared meanwhile; archive it first",
            paths.member_dir().display()
        );
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&paths.data_dir)
        .with_context(|| format!("cannot create {}", paths.data_dir.display()))?;
    // Restored inside the data directory, so that moving the result into
    // place is a rename on one filesystem; the tools refuse an existing
    // directory, and this one is new.
    let unique = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let tmp = paths
        .data_dir
        .join(format!(".restore-{}-{unique}", std::process::id()));
    let initial_cluster = r
        .peer_urls
        .iter()
        .map(|u| format!("{}={u}", r.name))
        .collect::<Vec<_>>()
        .join(",");
    let mut cmd = std::process::Command::new(r.tool.path());
    cmd.arg("snapshot")
        .arg("restore")
        .arg(&r.snapshot)
        .arg("--name")
        .arg(&r.name)
        .arg("--initial-cluster")
        .arg(&initial_cluster)
        .arg("--initial-cluster-token")
        .arg(&r.token)
        .arg("--initial-advertise-peer-urls")
        .arg(r.peer_urls.join(","))
        .arg("--data-dir")
        .arg(&tmp);
    if let RestoreTool::Etcdctl(_) = r.tool {
        cmd.env("ETCDCTL_API", "3");
    }
    progress(&format!(
        "restoring with {} (a large snapshot takes a while) ...",
        r.tool.path().display()
    ));
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {}", r.tool.path().display()))?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        bail!(
            "{} snapshot restore failed ({}): {}; nothing was moved into {} (its output, if any, is in {})",
            r.tool.path().display(),
            out.status,
            log.trim(),
            paths.data_dir.display(),
            tmp.display()
        );
    }
    let restored = tmp.join("member");
    if !restored.is_dir() {
        bail!(
            "{} reported success but left no member directory in {}",
            r.tool.path().display(),
            tmp.display()
        );
    }
    // The tools log the new cluster's and member's ids as they add the
    // member (etcd 3.4 to 3.6); without those lines the ids stay unknown
    // and the daemon records them once etcd runs.
    let cluster_id = logged_id(&log, "cluster-id");
    let member_id = logged_id(&log, "added-peer-id");
    // The epoch first: a crash before the data is in place leaves a raised
    // epoch and no data (run the command again); the other order could leave
    // restored data under the old epoch, which the other node's data would
    // not be stale against.
    paths.write_state(&StateFile {
        epoch: r.epoch,
        departed: false,
        formed: true,
        cluster_id,
        member_id,
        voters: vec![r.name.clone()],
        ..StateFile::default()
    })?;
    chown_like(&restored, &paths.data_dir)?;
    std::fs::rename(&restored, paths.member_dir()).with_context(|| {
        format!(
            "cannot move {} to {}",
            restored.display(),
            paths.member_dir().display()
        )
    })?;
    std::fs::File::open(&paths.data_dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot fsync {}", paths.data_dir.display()))?;
    // Empty now; a leftover would only be an empty directory.
    let _ = std::fs::remove_dir(&tmp);
    // The in-sync marker spoke of the data that was here before.
    paths.clear_in_sync()?;
    let id = |v: Option<u64>| v.map_or_else(|| "unknown".to_owned(), |v| format!("{v:x}"));
    Ok(vec![
        format!(
            "restored {} into {} (cluster id {}, member id {})",
            r.snapshot.display(),
            paths.member_dir().display(),
            id(cluster_id),
            id(member_id)
        ),
        format!("epoch is now {}, formed, voters [{}]", r.epoch, r.name),
    ])
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
        RecoverAction::Archive => archive(paths, "operator: keep the peer's data", now)?,
        RecoverAction::Restore(src) => {
            std::fs::create_dir_all(&paths.data_dir)
                .with_context(|| format!("cannot create {}", paths.data_dir.display()))?;
            std::fs::rename(src.join("member"), paths.member_dir())
                .with_context(|| format!("cannot move {} back", src.join("member").display()))?;
            if let Ok(state) = std::fs::read(src.join("state.json")) {
                crate::reconcile::local::write_durably(&paths.state_file, &state)?;
            }
            vec![format!(
                "restored {} (its checksum file stays in {})",
                paths.member_dir().display(),
                src.display()
            )]
        }
        RecoverAction::RestoreSnapshot(r) => {
            let mut done = if r.archive_first {
                archive(paths, "operator: restore a snapshot", now)?
            } else {
                Vec::new()
            };
            done.extend(restore_snapshot(r, paths, progress)?);
            done
        }
    })
}

/// Moves this node's member directory into the archive directory with its
/// checksum, for `why`.
fn archive(paths: &LocalPaths, why: &str, now: u64) -> anyhow::Result<Vec<String>> {
    let dest = paths.archive(why, now)?;
    crate::reconcile::local::record_checksum(&dest, None)?;
    Ok(vec![format!("archived to {}", dest.display())])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn etcd() -> LocalEtcd {
        LocalEtcd {
            binary: "/nonexistent/etcd".into(),
            peer_urls: vec!["http://127.0.0.1:2380".into()],
        }
    }

    fn paths(t: &std::path::Path) -> LocalPaths {
        LocalPaths {
            data_dir: t.join("data"),
            state_file: t.join("state/failover.json"),
            run_dir: t.join("run"),
            archive_dir: t.join("data.archive"),
        }
    }

    fn req(what: RecoverWhat, node: &str) -> RecoverRequest {
        RecoverRequest {
            what,
            node: node.into(),
            archive: None,
            snapshot: None,
            confirm: true,
            allow_older_epoch: false,
        }
    }

    fn quiet(_: &str) {}

    #[test]
    fn plans_and_their_effects() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        // No data: nothing to force from.
        let force = req(RecoverWhat::ForceNewCluster, "a");
        assert!(plan(&force, "a", &p, &etcd()).is_err());
        // Only on the node whose data is kept.
        assert!(plan(&req(RecoverWhat::ForceNewCluster, "b"), "a", &p, &etcd()).is_err());
        std::fs::create_dir_all(p.member_dir().join("snap")).unwrap();
        std::fs::write(p.member_dir().join("snap/db"), b"x").unwrap();
        p.update_state(|s| {
            s.cluster_id = Some(1);
            s.member_id = Some(2);
        })
        .unwrap();
        let pl = plan(&force, "a", &p, &etcd()).unwrap();
        apply(&pl.action, &p, &mut quiet).unwrap();
        assert_eq!(p.in_sync(), Some(p.boot_id().unwrap()));
        // keep-data-of self raises the epoch.
        let keep = req(RecoverWhat::KeepDataOf, "a");
        let pl = plan(&keep, "a", &p, &etcd()).unwrap();
        apply(&pl.action, &p, &mut quiet).unwrap();
        assert_eq!(p.read_state().unwrap().epoch, 1);
        // keep-data-of the peer archives ours (never deletes) ...
        let pl = plan(&req(RecoverWhat::KeepDataOf, "b"), "a", &p, &etcd()).unwrap();
        assert!(pl.needs_etcd_stopped);
        apply(&pl.action, &p, &mut quiet).unwrap();
        assert!(!p.has_data());
        assert_eq!(p.archives().len(), 1);
        // ... and restore-archive brings it back with its epoch.
        let restore = req(RecoverWhat::RestoreArchive, "a");
        let pl = plan(&restore, "a", &p, &etcd()).unwrap();
        apply(&pl.action, &p, &mut quiet).unwrap();
        assert_eq!(std::fs::read(p.member_dir().join("snap/db")).unwrap(), b"x");
        assert_eq!(p.read_state().unwrap().epoch, 1);
    }

    /// A file that passes the snapshot check: a bbolt magic and the SHA-256
    /// trailer etcd appends.
    fn fake_snapshot(p: &Path) {
        use sha2::Digest;
        let mut db = vec![0u8; 4096];
        db[16..20].copy_from_slice(&0xED0C_DAEDu32.to_le_bytes());
        let sum = sha2::Sha256::digest(&db);
        db.extend_from_slice(&sum);
        std::fs::write(p, db).unwrap();
    }

    #[test]
    fn restore_snapshot_plans_above_every_known_epoch_and_refuses_existing_data() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        let snap = t.path().join("s.db");
        let bin = t.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let tool = bin.join("etcdctl");
        std::fs::write(&tool, "#!/bin/sh\nexit 1\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let local = LocalEtcd {
            binary: bin.join("etcd"),
            peer_urls: vec!["http://127.0.0.1:2380".into()],
        };
        let what = RecoverRequest {
            snapshot: Some(snap.clone()),
            ..req(RecoverWhat::RestoreSnapshot, "a")
        };
        let what_b = RecoverRequest {
            node: "b".into(),
            ..what.clone()
        };
        // Only the node itself restores.
        assert!(plan(&what_b, "a", &p, &local).is_err());
        // A file that is not a verified snapshot is refused before anything.
        std::fs::write(&snap, b"not a snapshot").unwrap();
        let e = plan(&what, "a", &p, &local).unwrap_err();
        assert!(
            format!("{e:#}").contains("not a sound etcd snapshot"),
            "{e:#}"
        );
        fake_snapshot(&snap);
        // Existing data is archived first, never deleted, and its epoch
        // counts.
        std::fs::create_dir_all(p.member_dir().join("snap")).unwrap();
        std::fs::write(p.member_dir().join("snap/db"), b"x").unwrap();
        p.update_state(|s| s.epoch = 4).unwrap();
        let pl = plan(&what, "a", &p, &local).unwrap();
        assert!(
            pl.describe[0].contains("nothing deleted"),
            "{:?}",
            pl.describe
        );
        let RecoverAction::RestoreSnapshot(r) = &pl.action else {
            panic!("{:?}", pl.action)
        };
        assert!(r.archive_first);
        assert_eq!(r.epoch, 5);
        // Archived (its epoch 4 goes with it), then a state file at 2: the
        // plan goes above both.
        p.archive("test", 1).unwrap();
        p.update_state(|s| s.epoch = 2).unwrap();
        let pl = plan(&what, "a", &p, &local).unwrap();
        assert!(pl.needs_etcd_stopped);
        let RecoverAction::RestoreSnapshot(r) = &pl.action else {
            panic!("{:?}", pl.action)
        };
        assert_eq!(r.epoch, 5);
        assert_eq!(r.tool, RestoreTool::Etcdctl(tool.clone()));
        assert_eq!(r.name, "a");
        let other = match plan(&what, "a", &p, &local).unwrap().action {
            RecoverAction::RestoreSnapshot(o) => o.token,
            a => panic!("{a:?}"),
        };
        assert_ne!(r.token, other, "every restore gets a fresh token");
        // A failing tool leaves the data directory without data and the
        // state file as it was.
        let e = apply(&pl.action, &p, &mut quiet).unwrap_err();
        assert!(e.to_string().contains("snapshot restore failed"), "{e}");
        assert!(!p.has_data());
        assert_eq!(p.read_state().unwrap().epoch, 2);
    }

    #[test]
    fn restore_archive_picks_the_newest_data_and_never_an_older_epoch() {
        use crate::reconcile::archives::test_archive;
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        // Names out of order, as a clock stepped back leaves them.
        let older = test_archive(&p, 5000, 7, 2, 900);
        let newest_of_7 = test_archive(&p, 3000, 7, 3, 500);
        let other_cluster = test_archive(&p, 4000, 8, 4, 100);
        let restore = req(RecoverWhat::RestoreArchive, "a");
        // No cluster named: the newest data of all.
        let pl = plan(&restore, "a", &p, &etcd()).unwrap();
        assert_eq!(pl.action, RecoverAction::Restore(other_cluster));
        // The state file names cluster 7 at epoch 3 (its data went
        // missing): the newest data of that cluster.
        p.write_state(&StateFile {
            cluster_id: Some(7),
            epoch: 3,
            formed: true,
            ..StateFile::default()
        })
        .unwrap();
        let pl = plan(&restore, "a", &p, &etcd()).unwrap();
        assert_eq!(pl.action, RecoverAction::Restore(newest_of_7.clone()));
        assert!(
            pl.describe[0].contains("cluster 7, epoch 3, raft index 500"),
            "{:?}",
            pl.describe
        );
        // An archive of an older epoch than the state file names is refused,
        // naming both epochs and the override.
        let named = RecoverRequest {
            archive: Some(older.clone()),
            ..restore.clone()
        };
        let e = plan(&named, "a", &p, &etcd()).unwrap_err().to_string();
        assert!(e.contains("holds data of epoch 2"), "{e}");
        assert!(e.contains("names epoch 3"), "{e}");
        assert!(e.contains("--allow-older-epoch"), "{e}");
        // A forced restart not yet confirmed counts too.
        p.update_state(|s| s.pending_epoch = Some(4)).unwrap();
        let e = plan(&restore, "a", &p, &etcd()).unwrap_err().to_string();
        assert!(e.contains("names epoch 4"), "{e}");
        p.update_state(|s| s.pending_epoch = None).unwrap();
        let allowed = RecoverRequest {
            allow_older_epoch: true,
            ..named
        };
        assert_eq!(
            plan(&allowed, "a", &p, &etcd()).unwrap().action,
            RecoverAction::Restore(older)
        );
        // Restored: the data and its state are back.
        apply(&pl.action, &p, &mut quiet).unwrap();
        assert_eq!(
            std::fs::read_to_string(p.member_dir().join("snap/db")).unwrap(),
            "7/3/500"
        );
        let st = p.read_state().unwrap();
        assert_eq!((st.cluster_id, st.epoch), (Some(7), 3));
    }

    #[test]
    fn ids_from_the_restore_log() {
        let log = r#"{"level":"info","msg":"restoring snapshot","path":"s.db"}
{"level":"info","msg":"added member","cluster-id":"7f2d1c7a3b3e9f10","local-member-id":"0","added-peer-id":"8e9e05c52164694d","added-peer-peer-urls":["http://127.0.0.1:2380"]}"#;
        assert_eq!(logged_id(log, "cluster-id"), Some(0x7f2d_1c7a_3b3e_9f10));
        assert_eq!(logged_id(log, "added-peer-id"), Some(0x8e9e_05c5_2164_694d));
        assert_eq!(logged_id(log, "local-member-id"), None, "zero is no id");
        assert_eq!(logged_id("no json here", "cluster-id"), None);
    }
}
