//! `etcd-warden` subcommand(s): Members.

use std::process::ExitCode;

/// Arguments: List etcd's members, live.
#[derive(Debug, clap::Args)]
pub struct MembersArgs {}

/// List etcd's members, live.
pub fn run_members(_args: MembersArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
