//! `etcd-warden` subcommand(s): PcsConfig, CrmConfig.

use std::process::ExitCode;

/// Arguments: Print the pcs commands that configure a cluster for this agent.
#[derive(Debug, clap::Args)]
pub struct PcsConfigArgs {}

/// Print the pcs commands that configure a cluster for this agent.
pub fn run_pcsconfig(_args: PcsConfigArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}

/// Arguments: Print the crmsh configuration (or CIB XML) for this agent.
#[derive(Debug, clap::Args)]
pub struct CrmConfigArgs {}

/// Print the crmsh configuration (or CIB XML) for this agent.
pub fn run_crmconfig(_args: CrmConfigArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
