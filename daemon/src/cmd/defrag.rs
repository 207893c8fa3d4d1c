//! `etcd-warden defrag`: ask the daemon to run its defragmentation policy
//! now for this node's member. The same rules as the daemon's own loop
//! apply (one member at a time, never while the cluster is degraded, never
//! the only voter, the leader after handing its leadership over); the
//! threshold too, unless `--below-threshold`.

use std::process::ExitCode;

use warden_api::{DefragReply, DefragRequest, paths};

use super::target::Target;

/// Arguments: Defragment this node's etcd member if the policy allows it now.
#[derive(Debug, clap::Args)]
#[command(after_long_help = EXIT_STATUS)]
pub(crate) struct DefragArgs {
    /// Where the daemon is. `--timeout` bounds the whole defragment
    /// (default 300 s; a large database takes minutes).
    #[command(flatten)]
    pub target: Target,
    /// Defragment even when the database is below the threshold
    /// ([defrag] fragmentation_percent, min_db_size_bytes); every safety
    /// rule still applies.
    #[arg(long)]
    pub below_threshold: bool,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The exit codes, for `--help` and the man page.
const EXIT_STATUS: &str = "Exit status:
  0   the member was defragmented
  1   the policy refused (the reason is printed), or the daemon could not be asked
  2   the defragmentation failed
  78  the configuration is refused (EX_CONFIG); stderr names the file, the line and the key";

/// The default `--timeout` of `etcd-warden defrag`, when the operator left
/// the generic 10 s: a defragment of a large database takes minutes.
const DEFRAG_TIMEOUT_SECS: u64 = 300;

/// Ask the daemon to defragment the local member; exit 0 when it did, 1
/// when the policy refused (the reason printed), 2 when it failed.
pub(crate) fn run_defrag(args: DefragArgs) -> anyhow::Result<ExitCode> {
    let mut target = args.target.clone();
    target.timeout = target.timeout.max(DEFRAG_TIMEOUT_SECS);
    if !args.json {
        eprintln!(
            "asking the daemon to defragment this node's etcd member (checks the cluster first; waits up to {}s)…",
            target.timeout
        );
    }
    let req = DefragRequest {
        below_threshold: args.below_threshold,
    };
    let r: DefragReply = target.post(paths::DEFRAG, &req)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        for s in &r.steps {
            eprintln!("  {s}");
        }
        println!("{}", r.message);
    }
    Ok(match (&r.run, r.done) {
        (_, true) => ExitCode::SUCCESS,
        (Some(_), false) => ExitCode::from(2),
        (None, false) => ExitCode::FAILURE,
    })
}
