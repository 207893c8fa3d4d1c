//! `etcd-warden recover …`: the one command a refusal names (rule 6). The
//! daemon refuses when no automatic answer is safe (divergent histories with
//! equal epochs, a lone node after a total outage, archived data with no live
//! data anywhere); an operator who knows more resolves it here.
//!
//! Every subcommand first prints what it will do. Without `--confirm` it
//! stops there (exit code 2), so that the command as the refusal prints it is
//! accepted and shows the plan; with `--confirm` it does it and prints what
//! it did. Nothing is ever deleted: data is moved into the archive directory.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};

use super::target::Target;
use crate::reconcile::{local::LocalPaths, paths_for};

/// Arguments of `etcd-warden recover`.
#[derive(Debug, clap::Args)]
pub struct RecoverArgs {
    /// What to resolve.
    #[command(subcommand)]
    pub what: RecoverCommand,
}

/// The resolutions.
#[derive(Debug, clap::Subcommand)]
pub enum RecoverCommand {
    /// Let NODE (this node) force a new one-member cluster from its local
    /// data although it cannot prove it holds every acknowledged write: you
    /// assert that the peer is down and that NODE's data is the one to keep.
    /// Sets this boot's in-sync marker; the daemon then forces once
    /// Pacemaker shows the peer down.
    ForceNewCluster(NodeArgs),
    /// Keep NODE's data where both nodes hold different histories of the
    /// same epoch. On NODE: raise its epoch, so that the other node sees its
    /// own data as stale. On the other node: archive the local data now.
    KeepDataOf(NodeArgs),
    /// Move the newest archive (or `--archive DIR`) of NODE (this node)
    /// back in place, where no live data exists anywhere.
    RestoreArchive(RestoreArgs),
}

/// The node to act for, and the confirmation.
#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    /// The node (as named in the configuration).
    #[arg(long, value_name = "NODE")]
    pub node: String,
    /// Do it (without: print the plan only and exit 2).
    #[arg(long, alias = "i-understand-the-peer-is-down")]
    pub confirm: bool,
    /// Where the daemon and its configuration are.
    #[command(flatten)]
    pub target: Target,
}

/// `restore-archive` arguments.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// Node and confirmation.
    #[command(flatten)]
    pub node: NodeArgs,
    /// The archive directory to restore (default: the newest).
    #[arg(long, value_name = "DIR")]
    pub archive: Option<PathBuf>,
}

/// Run `etcd-warden recover`.
pub fn run_recover(args: RecoverArgs) -> anyhow::Result<ExitCode> {
    let (node, confirm, target) = match &args.what {
        RecoverCommand::ForceNewCluster(a) | RecoverCommand::KeepDataOf(a) => {
            (&a.node, a.confirm, &a.target)
        }
        RecoverCommand::RestoreArchive(r) => (&r.node.node, r.node.confirm, &r.node.target),
    };
    let settings = target.settings()?;
    if !settings.nodes.iter().any(|n| &n.name == node) {
        bail!(
            "--node {node}: not a configured node (configured: {})",
            settings
                .nodes
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let paths = paths_for(&settings);
    let me = settings.node_name.as_str();
    let plan = plan(&args.what, node, me, &paths)?;
    println!("etcd-warden recover on {me}:");
    for p in &plan.describe {
        println!("  will: {p}");
    }
    if !confirm {
        println!("nothing done; run again with --confirm to do it");
        return Ok(ExitCode::from(2));
    }
    if plan.needs_etcd_stopped {
        let running = target
            .client()
            .get::<warden_api::NodeStatus>(warden_api::paths::STATUS, target.timeout())
            .map(|s| s.etcd_running)
            .context("cannot ask the daemon whether etcd runs (it must be stopped first)")?;
        if running {
            bail!(
                "etcd runs on {me}: stop it first (e.g. `crm resource ban <etcd clone> {me}`), then run this again"
            );
        }
    }
    for done in apply(&plan.action, &paths)? {
        println!("  done: {done}");
    }
    Ok(ExitCode::SUCCESS)
}

/// What a resolution does on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoverAction {
    /// Set the in-sync marker for this boot.
    MarkInSync,
    /// Raise the data's epoch by one.
    RaiseEpoch,
    /// Move the local member directory into the archive directory.
    Archive,
    /// Move this archive back in place.
    Restore(PathBuf),
}

/// The plan: the action and its description.
#[derive(Debug)]
pub struct Plan {
    /// The action.
    pub action: RecoverAction,
    /// Human-readable lines.
    pub describe: Vec<String>,
    /// The local etcd must not run.
    pub needs_etcd_stopped: bool,
}

/// What `what` means on node `me`.
pub fn plan(
    what: &RecoverCommand,
    node: &str,
    me: &str,
    paths: &LocalPaths,
) -> anyhow::Result<Plan> {
    let must_be_me = |verb: &str| -> anyhow::Result<()> {
        if node != me {
            bail!("{verb} acts on the node whose data is used: run it on {node}, not on {me}");
        }
        Ok(())
    };
    Ok(match what {
        RecoverCommand::ForceNewCluster(_) => {
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
                    "let the daemon force a new one-member cluster from it once Pacemaker shows the peer down".into(),
                    "after a total outage Corosync holds quorum back until the peer was seen (wait_for_all): if the peer stays off, lift that yourself with `pcs quorum unblock`, so that Pacemaker fences the peer and starts etcd here".into(),
                    "the peer, when it returns, archives its data and rejoins as a learner".into(),
                ],
                needs_etcd_stopped: false,
            }
        }
        RecoverCommand::KeepDataOf(_) if node == me => {
            let epoch = paths.read_state()?.epoch;
            Plan {
                action: RecoverAction::RaiseEpoch,
                describe: vec![format!(
                    "raise the epoch of {me}'s data from {epoch} to {} in {}, so that the other node's data is stale and is archived",
                    epoch + 1,
                    paths.state_file.display()
                )],
                needs_etcd_stopped: false,
            }
        }
        RecoverCommand::KeepDataOf(_) => {
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
        RecoverCommand::RestoreArchive(r) => {
            must_be_me("restore-archive")?;
            if paths.has_data() {
                bail!(
                    "{me} already has data in {}: archive it first (keep-data-of)",
                    paths.member_dir().display()
                );
            }
            let src = match &r.archive {
                Some(a) => a.clone(),
                None => paths
                    .archives()
                    .pop()
                    .with_context(|| format!("no archive in {}", paths.archive_dir.display()))?,
            };
            if !src.join("member").is_dir() {
                bail!("{} holds no member directory", src.display());
            }
            Plan {
                describe: vec![format!(
                    "move {} back to {} and restore its state file",
                    src.join("member").display(),
                    paths.member_dir().display()
                )],
                action: RecoverAction::Restore(src),
                needs_etcd_stopped: true,
            }
        }
    })
}

/// Carry out `action`; returns what was done.
pub fn apply(action: &RecoverAction, paths: &LocalPaths) -> anyhow::Result<Vec<String>> {
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
            let st = paths.update_state(|s| s.epoch += 1)?;
            vec![format!("epoch is now {}", st.epoch)]
        }
        RecoverAction::Archive => {
            let dest = paths.archive("operator: keep the peer's data", now)?;
            vec![format!("archived to {}", dest.display())]
        }
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

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
                };
                assert_eq!(got.node, n);
                assert!(!got.confirm, "a refusal's command must only show the plan");
            }
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

    fn node_args(node: &str) -> NodeArgs {
        NodeArgs {
            node: node.into(),
            confirm: true,
            target: Target {
                socket: None,
                config: "/nonexistent".into(),
                standalone: None,
                timeout: 1,
            },
        }
    }

    #[test]
    fn plans_and_their_effects() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        // No data: nothing to force from.
        let force = RecoverCommand::ForceNewCluster(node_args("a"));
        assert!(plan(&force, "a", "a", &p).is_err());
        // Only on the node whose data is kept.
        assert!(plan(&force, "b", "a", &p).is_err());
        std::fs::create_dir_all(p.member_dir().join("snap")).unwrap();
        std::fs::write(p.member_dir().join("snap/db"), b"x").unwrap();
        p.update_state(|s| {
            s.cluster_id = Some(1);
            s.member_id = Some(2);
        })
        .unwrap();
        let pl = plan(&force, "a", "a", &p).unwrap();
        apply(&pl.action, &p).unwrap();
        assert_eq!(p.in_sync(), Some(p.boot_id().unwrap()));
        // keep-data-of self raises the epoch.
        let keep = RecoverCommand::KeepDataOf(node_args("a"));
        let pl = plan(&keep, "a", "a", &p).unwrap();
        apply(&pl.action, &p).unwrap();
        assert_eq!(p.read_state().unwrap().epoch, 1);
        // keep-data-of the peer archives ours (never deletes) ...
        let pl = plan(&keep, "b", "a", &p).unwrap();
        assert!(pl.needs_etcd_stopped);
        apply(&pl.action, &p).unwrap();
        assert!(!p.has_data());
        assert_eq!(p.archives().len(), 1);
        // ... and restore-archive brings it back with its epoch.
        let restore = RecoverCommand::RestoreArchive(RestoreArgs {
            node: node_args("a"),
            archive: None,
        });
        let pl = plan(&restore, "a", "a", &p).unwrap();
        apply(&pl.action, &p).unwrap();
        assert_eq!(std::fs::read(p.member_dir().join("snap/db")).unwrap(), b"x");
        assert_eq!(p.read_state().unwrap().epoch, 1);
    }
}
