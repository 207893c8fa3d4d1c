//! `etcd-warden status`: this node's state and etcd's live view.

use std::process::ExitCode;

use warden_api::{NodeStatus, paths};

use super::target::Target;

/// Arguments: Show this node's state and etcd's live view.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Where the daemon is.
    #[command(flatten)]
    pub target: Target,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Render a status as a two-column table.
pub fn table(s: &NodeStatus) -> String {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let rows = [
        ("node", s.node.clone()),
        ("topology", s.topology.clone()),
        ("state", s.state.clone()),
        (
            "etcd",
            match s.etcd_pid {
                Some(pid) => format!("running (pid {pid})"),
                None => "not running".into(),
            },
        ),
        ("quorum", if s.quorum { "yes" } else { "no" }.into()),
        ("member", opt(s.member_id.map(|i| format!("{i:x}")))),
        ("leader", opt(s.leader_id.map(|i| format!("{i:x}")))),
        ("learner", if s.is_learner { "yes" } else { "no" }.into()),
        ("raft term", opt(s.raft_term.map(|v| v.to_string()))),
        ("raft index", opt(s.raft_index.map(|v| v.to_string()))),
        ("revision", opt(s.revision.map(|v| v.to_string()))),
        ("reason", opt(s.reason.clone())),
    ];
    rows.iter().map(|(k, v)| format!("{k:<11} {v}\n")).collect()
}

/// Show this node's state and etcd's live view.
pub fn run_status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let client = args.target.client();
    let s: NodeStatus = client.get(paths::STATUS, args.target.timeout())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{}", table(&s));
    }
    Ok(ExitCode::SUCCESS)
}
