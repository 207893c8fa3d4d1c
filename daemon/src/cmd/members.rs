//! `etcd-warden members`: etcd's member list, asked live.

use std::process::ExitCode;

use warden_api::{Member, paths};

use super::target::Target;

/// Arguments: List etcd's members, live.
#[derive(Debug, clap::Args)]
pub(crate) struct MembersArgs {
    /// Where the daemon is.
    #[command(flatten)]
    pub(crate) target: Target,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Render members as a table (IDs in hex, as etcdctl prints them).
pub(crate) fn table(ms: &[Member]) -> String {
    let mut out = format!(
        "{:<16}  {:<16}  {:<7}  {:<30}  {}\n",
        "ID", "NAME", "ROLE", "PEER URLS", "CLIENT URLS"
    );
    for m in ms {
        out.push_str(&format!(
            "{:<16x}  {:<16}  {:<7}  {:<30}  {}\n",
            m.id,
            if m.name.is_empty() {
                "(unstarted)"
            } else {
                &m.name
            },
            if m.is_learner { "learner" } else { "voter" },
            m.peer_urls.join(","),
            m.client_urls.join(","),
        ));
    }
    out
}

/// List etcd's members, live.
pub(crate) fn run_members(args: MembersArgs) -> anyhow::Result<ExitCode> {
    let ms: Vec<Member> = args.target.get(paths::MEMBERS)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&ms)?);
    } else {
        print!("{}", table(&ms));
    }
    Ok(ExitCode::SUCCESS)
}
