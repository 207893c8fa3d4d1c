//! `etcd-warden` subcommand(s): Collect.

use std::process::ExitCode;

/// Arguments: Build the PacemakerCluster report from crm_mon and write it.
#[derive(Debug, clap::Args)]
pub struct CollectArgs {}

/// Build the PacemakerCluster report from crm_mon and write it.
pub fn run_collect(_args: CollectArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
