//! `etcd-warden` subcommand(s): Alert.

use std::process::ExitCode;

/// Arguments: Pacemaker alert agent: forward CRM_alert_* events to the daemon.
#[derive(Debug, clap::Args)]
pub struct AlertArgs {}

/// Pacemaker alert agent: forward CRM_alert_* events to the daemon.
pub fn run_alert(_args: AlertArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
