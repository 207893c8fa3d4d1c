//! `etcd-warden recover …`: the one command a refusal names. The
//! daemon refuses when no automatic answer is safe (divergent histories with
//! equal epochs, a lone node after a total outage, archived data with no live
//! data anywhere); an operator who knows more resolves it here.
//!
//! Every subcommand first prints what it will do. Without `--confirm` it
//! stops there (exit code 2), so that the command as the refusal prints it is
//! accepted and shows the plan; with `--confirm` it does it and prints what
//! it did. Nothing is ever deleted: data is moved into the archive directory.
//!
//! The command is a client of the daemon (`POST /v1/recover`): the daemon
//! plans and acts under its one-pass-at-a-time lock, so that no failover
//! pass or agent action touches the files meanwhile. Only when the daemon is
//! not running (its socket does not answer) does the command act on the
//! files itself, and it says so.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use warden_api::client::ClientError;
use warden_api::{RecoverReply, RecoverRequest, RecoverWhat};

use super::target::Target;
use crate::config::Settings;
use crate::reconcile::paths_for;
use crate::recover::{apply, check_node, local_etcd, plan};

/// Arguments of `etcd-warden recover`.
#[derive(Debug, clap::Args)]
pub(crate) struct RecoverArgs {
    /// What to resolve.
    #[command(subcommand)]
    pub(crate) what: RecoverCommand,
}

/// The resolutions.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum RecoverCommand {
    /// Let NODE (this node) force a new one-member cluster from its local
    /// data although it cannot prove it holds every acknowledged write: you
    /// assert that the peer is down and that NODE's data is the one to keep.
    /// Sets this boot's in-sync marker; the daemon then forces once
    /// Pacemaker shows the peer down (or the peer's data shows that it
    /// left the member list, its removal committed). On a learner's data,
    /// which etcd cannot force into a cluster, it stops etcd there if it
    /// has no leader, archives the data and restores its backend as a new
    /// one-member cluster of NODE, its revision moved on.
    ForceNewCluster(NodeArgs),
    /// Keep NODE's data where both nodes hold different histories of the
    /// same epoch. On NODE: raise its epoch, so that the other node sees its
    /// own data as stale. On the other node: archive the local data now.
    KeepDataOf(NodeArgs),
    /// Move the newest archive (or `--archive DIR`) of NODE (this node)
    /// back in place, where no live data exists anywhere.
    RestoreArchive(RestoreArgs),
    /// Restore a snapshot (as `etcd-warden snapshot save` writes it) into
    /// NODE's (this node's) empty data directory as a new one-member cluster
    /// of NODE, with a fresh cluster token, and raise the epoch above every
    /// epoch known here, so that the peer's data counts as stale: it is
    /// archived when the peer rejoins, as a learner. Writes made after the
    /// snapshot was taken are lost.
    RestoreSnapshot(RestoreSnapshotArgs),
}

/// The exit codes, for `--help` and the man page.
const EXIT_STATUS: &str = "Exit status:
  0   done (with --confirm)
  1   refused or failed (the message on stderr says why)
  2   the plan is printed and nothing is done (without --confirm)
  78  the configuration is refused (EX_CONFIG); stderr names the file, the line and the key";

/// The node to act for, and the confirmation.
#[derive(Debug, clap::Args)]
#[command(after_long_help = EXIT_STATUS)]
pub(crate) struct NodeArgs {
    /// The node (as named in the configuration).
    #[arg(long, value_name = "NODE")]
    pub(crate) node: String,
    /// Do it (without: print the plan only and exit 2).
    #[arg(long, alias = "i-understand-the-peer-is-down")]
    pub(crate) confirm: bool,
    /// Where the daemon and its configuration are.
    #[command(flatten)]
    pub(crate) target: Target,
}

/// `restore-archive` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct RestoreArgs {
    /// Node and confirmation.
    #[command(flatten)]
    pub(crate) node: NodeArgs,
    /// The archive directory to restore (default: the one with the newest
    /// data of the cluster the state file names).
    #[arg(long, value_name = "DIR")]
    pub(crate) archive: Option<PathBuf>,
    /// Restore an archive whose epoch is older than the one the state file
    /// names (only when no data of that epoch exists anywhere any more).
    #[arg(long)]
    pub(crate) allow_older_epoch: bool,
}

/// `restore-snapshot` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct RestoreSnapshotArgs {
    /// Node and confirmation.
    #[command(flatten)]
    pub(crate) node: NodeArgs,
    /// The snapshot file (verified before anything is done).
    #[arg(long, value_name = "FILE")]
    pub(crate) snapshot: PathBuf,
}

/// How long the daemon may take for a resolution: a snapshot restore runs
/// etcd's restore tool over the whole database.
const RECOVER_DEADLINE: Duration = Duration::from_secs(600);

/// The request for `what`, with file paths made absolute (the daemon does
/// not run in this command's directory).
fn request(what: &RecoverCommand) -> anyhow::Result<(RecoverRequest, &Target)> {
    let absolute = |p: &PathBuf| -> anyhow::Result<PathBuf> {
        std::path::absolute(p).with_context(|| format!("cannot resolve {}", p.display()))
    };
    let (kind, node, archive, snapshot) = match what {
        RecoverCommand::ForceNewCluster(a) => (RecoverWhat::ForceNewCluster, a, None, None),
        RecoverCommand::KeepDataOf(a) => (RecoverWhat::KeepDataOf, a, None, None),
        RecoverCommand::RestoreArchive(r) => (
            RecoverWhat::RestoreArchive,
            &r.node,
            r.archive.as_ref().map(absolute).transpose()?,
            None,
        ),
        RecoverCommand::RestoreSnapshot(r) => (
            RecoverWhat::RestoreSnapshot,
            &r.node,
            None,
            Some(absolute(&r.snapshot)?),
        ),
    };
    Ok((
        RecoverRequest {
            what: kind,
            node: node.node.clone(),
            archive,
            snapshot,
            confirm: node.confirm,
            allow_older_epoch: matches!(what, RecoverCommand::RestoreArchive(r) if r.allow_older_epoch),
        },
        &node.target,
    ))
}

/// Trees the daemon's unit hides from it (`PrivateTmp=`, `ProtectHome=`):
/// a file there is not the file the daemon would open under that name.
const HIDDEN_FROM_DAEMON: [&str; 5] = ["/tmp", "/var/tmp", "/home", "/root", "/run/user"];

/// A copy of a snapshot the daemon cannot see, in its state directory,
/// removed when dropped (the operator's file stays where it was).
struct Staged(PathBuf);

impl Drop for Staged {
    fn drop(&mut self) {
        if std::fs::remove_file(&self.0).is_ok() {
            println!("removed the staged copy {}", self.0.display());
        }
    }
}

/// Copies `snapshot` into `dir` when it lies in a tree hidden from the
/// daemon, and says so; `None` when the daemon sees it where it is.
fn stage(snapshot: &std::path::Path, dir: &std::path::Path) -> anyhow::Result<Option<Staged>> {
    if !HIDDEN_FROM_DAEMON.iter().any(|h| snapshot.starts_with(h)) {
        return Ok(None);
    }
    let name = snapshot
        .file_name()
        .with_context(|| format!("{} names no file", snapshot.display()))?;
    let len = std::fs::metadata(snapshot)
        .with_context(|| format!("cannot read the snapshot {}", snapshot.display()))?
        .len();
    let to = dir.join(format!(".restore-{}", name.to_string_lossy()));
    println!(
        "{} is in a directory the daemon's sandbox hides (PrivateTmp=, ProtectHome=): copying it ({} MiB) to {} ...",
        snapshot.display(),
        len >> 20,
        to.display()
    );
    let staged = Staged(to);
    std::fs::copy(snapshot, &staged.0).with_context(|| {
        format!(
            "cannot copy {} to {}",
            snapshot.display(),
            staged.0.display()
        )
    })?;
    Ok(Some(staged))
}

/// Run `etcd-warden recover`.
pub(crate) fn run_recover(args: RecoverArgs) -> anyhow::Result<ExitCode> {
    let (mut req, target) = request(&args.what)?;
    let settings = target.settings()?;
    check_node(&settings, &req.node)?;
    let me = settings.node_name.as_str();
    let client = target.client()?;
    let state_file = paths_for(&settings).state_file;
    let staged = match (&req.snapshot, state_file.parent()) {
        (Some(s), Some(dir)) => stage(s, dir)?,
        _ => None,
    };
    if let Some(st) = &staged {
        req.snapshot = Some(st.0.clone());
    }
    if req.confirm {
        println!(
            "etcd-warden recover on {me}: asking the daemon to do it (a restore of a large database takes a while) ..."
        );
    }
    let reply = match client.post::<_, RecoverReply>(
        warden_api::paths::RECOVER,
        &req,
        RECOVER_DEADLINE,
    ) {
        Ok(r) => r,
        Err(ClientError::Connect { path, error }) => {
            println!(
                "etcd-warden recover on {me}: the daemon is not running (no answer on {}: {error}); acting on its files directly",
                path.display()
            );
            return offline(&req, &settings);
        }
        Err(ClientError::Status { message, .. }) => bail!("{message}"),
        Err(e) => return Err(e).context("the daemon did not carry out the resolution"),
    };
    println!("etcd-warden recover on {}:", reply.node);
    for p in &reply.plan {
        println!("  will: {p}");
    }
    if !req.confirm {
        println!("nothing done; run again with --confirm to do it");
        return Ok(ExitCode::from(2));
    }
    for done in &reply.done {
        println!("  done: {done}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The resolution without the daemon: its files are acted on directly.
/// etcd must not run where the plan needs it stopped; with the daemon gone,
/// that is whether anything answers on etcd's client URL.
fn offline(req: &RecoverRequest, settings: &Settings) -> anyhow::Result<ExitCode> {
    let paths = paths_for(settings);
    let me = settings.node_name.as_str();
    let plan = plan(req, me, &paths, &local_etcd(settings))?;
    for p in &plan.describe {
        println!("  will: {p}");
    }
    if !req.confirm {
        println!("nothing done; run again with --confirm to do it");
        return Ok(ExitCode::from(2));
    }
    if (plan.needs_etcd_stopped || plan.stops_etcd) && etcd_answers(settings) {
        bail!(
            "etcd answers on {} on {me}: stop it first (`pcs resource ban <etcd clone> {me}`, with crmsh `crm resource ban <etcd clone> {me}`), then run this again",
            settings.local_client_url()
        );
    }
    for done in apply(&plan.action, &paths, &mut |p| println!("  {p}"))? {
        println!("  done: {done}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether something accepts connections on the local etcd's client URL.
fn etcd_answers(settings: &Settings) -> bool {
    let url = settings.local_client_url();
    let hostport = url.split("://").nth(1).unwrap_or(url).trim_end_matches('/');
    use std::net::ToSocketAddrs;
    hostport.to_socket_addrs().is_ok_and(|mut addrs| {
        addrs.any(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_millis(500)).is_ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    /// A snapshot under /tmp (hidden from the sandboxed daemon) is copied
    /// into the given directory and the copy removed when dropped; the
    /// operator's file stays. One the daemon sees is left where it is.
    #[test]
    fn snapshots_the_daemon_cannot_see_are_staged() {
        let src = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
        let file = src.path().join("etcd.db");
        std::fs::write(&file, b"snapshot").unwrap();
        let state = tempfile::tempdir().unwrap();
        let staged = stage(&file, state.path()).unwrap().expect("staged");
        assert_eq!(staged.0, state.path().join(".restore-etcd.db"));
        assert_eq!(std::fs::read(&staged.0).unwrap(), b"snapshot");
        let copy = staged.0.clone();
        drop(staged);
        assert!(!copy.exists());
        assert!(file.exists());
        let seen = std::path::Path::new("/var/lib/etcd-warden/snapshots/x.db");
        assert!(stage(seen, state.path()).unwrap().is_none());
        let missing = src.path().join("missing.db");
        let e = stage(&missing, state.path()).err().unwrap();
        assert!(
            format!("{e:#}").contains("cannot read the snapshot"),
            "{e:#}"
        );
    }

    /// The commands `decide` names in refusals are exactly what this
    /// subcommand accepts.
    #[test]
    fn refusal_commands_parse() {
        let nodes = ["nodeA", "node-b"];
        for n in nodes {
            for cmd in [
                warden_failover::decide::resolve::force_new_cluster(n),
                warden_failover::decide::resolve::keep_data_of(n),
                warden_failover::decide::resolve::restore_archive(n),
            ] {
                let argv: Vec<&str> = cmd.split_whitespace().collect();
                let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{cmd}: {e}"));
                let Command::Recover(a) = cli.command else {
                    panic!("{cmd}: not recover")
                };
                let got = match a.what {
                    RecoverCommand::ForceNewCluster(x) | RecoverCommand::KeepDataOf(x) => x,
                    RecoverCommand::RestoreArchive(r) => r.node,
                    RecoverCommand::RestoreSnapshot(r) => r.node,
                };
                assert_eq!(got.node, n);
                assert!(!got.confirm, "a refusal's command must only show the plan");
            }
        }
        // The restore-snapshot command a refusal names, with its `<FILE>`
        // placeholder filled in by the operator.
        let cmd = "etcd-warden recover restore-snapshot --node nodeA --snapshot /x/y.db";
        let cli =
            Cli::try_parse_from(cmd.split_whitespace()).unwrap_or_else(|e| panic!("{cmd}: {e}"));
        let Command::Recover(a) = cli.command else {
            panic!("{cmd}: not recover")
        };
        let RecoverCommand::RestoreSnapshot(r) = a.what else {
            panic!("{cmd}: not restore-snapshot")
        };
        assert_eq!(r.node.node, "nodeA");
        assert_eq!(r.snapshot, PathBuf::from("/x/y.db"));
        assert!(!r.node.confirm);
    }
}
