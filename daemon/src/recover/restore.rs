//! Restoring etcd data as a new one-member cluster with etcd's own tool
//! (`etcdutl`, or `etcdctl` on 3.4): from a snapshot file, or from the
//! backend of data etcd cannot force into a cluster (a learner's).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use std::time::Duration;

use crate::config::host::executable;
use crate::reconcile::local::{LocalPaths, StateFile};
use crate::tool::Cmd;

/// The tool that restores a snapshot into a data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RestoreTool {
    /// `etcdutl snapshot restore` (etcd 3.5 and later).
    Etcdutl(PathBuf),
    /// `etcdctl snapshot restore` (etcd 3.4; deprecated in 3.5).
    Etcdctl(PathBuf),
}

impl RestoreTool {
    pub(crate) fn path(&self) -> &Path {
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
    /// What is restored.
    pub(crate) source: RestoreSource,
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
    /// How the restored data's revision moves past every revision the
    /// writes it lacks could have had.
    pub(crate) revision: RevisionStep,
    /// etcd's uid and gid (see [`super::LocalEtcd::owner`]).
    pub(crate) owner: Option<(u32, u32)>,
}

/// What a restore reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RestoreSource {
    /// A snapshot file (as `etcd-warden snapshot save` writes it), its
    /// checksum verified.
    Snapshot(PathBuf),
    /// The backend (`member/snap/db`) of this node's own data, once its
    /// member directory is in the archive directory: a learner's, which
    /// etcd cannot force into a cluster (`--force-new-cluster` on a
    /// learner's data ends in etcd's "removed all voters" panic). A
    /// backend carries no snapshot checksum.
    OwnBackend,
    /// The backend of an archive's data.
    ArchivedBackend(PathBuf),
}

/// How far the revision moves after a restore, and who moves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RevisionStep {
    /// The restore tool (`etcdutl snapshot restore --bump-revision N
    /// --mark-compacted`, etcd 3.5.10 and later).
    Tool(u64),
    /// The daemon, at etcd's first start on the restored data, through the
    /// API (`revision_bump_owed` in the state file), where the tool has no
    /// such flag.
    Daemon(u64),
}

/// The revision step a restore tool offers: the tool's flag where its help
/// names it, else the daemon's.
pub(crate) fn revision_step(tool: &RestoreTool) -> RevisionStep {
    let cmd = tool_cmd(tool).args(["snapshot", "restore", "--help"]);
    let offers = cmd.output(HELP_DEADLINE, TOOL_OUTPUT).is_ok_and(|o| {
        String::from_utf8_lossy(&o.stdout).contains("--bump-revision")
            || String::from_utf8_lossy(&o.stderr).contains("--bump-revision")
    });
    if offers {
        RevisionStep::Tool(TOOL_REVISION_BUMP)
    } else {
        RevisionStep::Daemon(crate::reconcile::revision_step::UNKNOWN_LOSS_REVISIONS)
    }
}

/// `tool` as a command for the runner (etcdctl told to speak v3).
fn tool_cmd(tool: &RestoreTool) -> Cmd {
    let cmd = Cmd::new([tool.path().as_os_str()]);
    match tool {
        RestoreTool::Etcdctl(_) => cmd.env("ETCDCTL_API", "3"),
        RestoreTool::Etcdutl(_) => cmd,
    }
}

/// How long the restore tool may take to print its help.
const HELP_DEADLINE: Duration = Duration::from_secs(10);

/// How long a restore may take: etcd's tool rewrites the whole database,
/// minutes for the largest (8 GiB) ones.
const RESTORE_DEADLINE: Duration = Duration::from_secs(3600);

/// The restore tool's output kept: its log lines, never the data.
const TOOL_OUTPUT: usize = 1024 * 1024;

/// The revision step with the tool's flag: far past any number of writes
/// a lost member could have acknowledged beyond the restored data, at no
/// cost (the tool writes one key).
const TOOL_REVISION_BUMP: u64 = 1_000_000_000;

impl RevisionStep {
    /// The plan's line for it.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Tool(n) => format!(
                "move the revision on by {n} and mark every older revision compacted (--bump-revision --mark-compacted): no revision the lost writes had is handed out again, and every watcher is told to list again"
            ),
            Self::Daemon(n) => format!(
                "the restore tool cannot move the revision on (etcd before 3.5.10): the daemon moves it on by {n} through etcd's API at the first start, with clients held off, and compacts below it"
            ),
        }
    }
}

/// Checks that the backend of the data in `member` holds everything its
/// log commits: etcd applies committed entries to its backend and commits
/// the backend in batches, so after a power loss the backend may lag the
/// log, and a restore of the backend alone would lose the difference.
/// Returns the backend's applied index.
pub(crate) fn backend_holds_the_log(member: &Path) -> anyhow::Result<u64> {
    let db = member.join("snap").join("db");
    let (applied, lacking) =
        crate::reconcile::backend_index::applied_and_lacking(member).map_err(|e| {
            anyhow::anyhow!(
                "cannot tell whether the backend {} holds everything its log commits ({e}), so restoring it could lose entries of the log; {AFTER_A_START}",
                db.display()
            )
        })?;
    if lacking > 0 {
        bail!(
            "the backend {} has applied the log up to index {applied}, but the log commits {lacking} more requests (etcd ended without committing its backend, as after a power loss): restoring the backend would lose them; {AFTER_A_START}",
            db.display()
        );
    }
    Ok(applied)
}

/// What makes a backend hold its log again.
const AFTER_A_START: &str = "let etcd start on this data once (it applies its log as it starts, with or without a leader: where Pacemaker has it started the daemon starts it, else `pcs resource cleanup <etcd clone> node=<node>`), then run this again, which stops it gracefully first";

/// A fresh random cluster token.
pub(super) fn fresh_token() -> anyhow::Result<String> {
    let hex = crate::reconcile::local::random_hex(16)
        .context("cannot read /dev/urandom for a fresh cluster token")?;
    Ok(format!("etcd-warden-restore-{hex}"))
}

/// The hex value of `"key":"…"` in etcd's log lines: JSON (etcd, etcdctl
/// 3.4) or the console format's fields (`"key": "…"`, etcdutl 3.5).
pub(super) fn logged_id(log: &str, key: &str) -> Option<u64> {
    let pat = format!("\"{key}\":");
    log.lines().find_map(|l| {
        let rest = l[l.find(&pat)? + pat.len()..].trim_start();
        let rest = rest.strip_prefix('"')?;
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

pub(super) fn restore_snapshot(
    r: &SnapshotRestore,
    snapshot: &Path,
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
    super::make_data_dir(paths, r.owner)?;
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
    let mut cmd = tool_cmd(&r.tool)
        .args(["snapshot", "restore"])
        .arg(snapshot)
        .args(["--name", &r.name, "--initial-cluster", &initial_cluster])
        .args(["--initial-cluster-token", &r.token])
        .args(["--initial-advertise-peer-urls", &r.peer_urls.join(",")])
        .arg("--data-dir")
        .arg(&tmp);
    if !matches!(r.source, RestoreSource::Snapshot(_)) {
        cmd = cmd.arg("--skip-hash-check");
    }
    if let RevisionStep::Tool(n) = r.revision {
        cmd = cmd
            .args(["--bump-revision", &n.to_string()])
            .arg("--mark-compacted");
    }
    progress(&format!(
        "restoring with {} (a large snapshot takes a while) ...",
        r.tool.path().display()
    ));
    let out = cmd
        .output(RESTORE_DEADLINE, TOOL_OUTPUT)
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
        revision_bump_owed: match r.revision {
            RevisionStep::Daemon(n) => Some(n),
            RevisionStep::Tool(_) => None,
        },
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
            snapshot.display(),
            paths.member_dir().display(),
            id(cluster_id),
            id(member_id)
        ),
        format!("epoch is now {}, formed, voters [{}]", r.epoch, r.name),
    ])
}
