//! Command-line parsing and dispatch. Each subcommand's arguments and code
//! live in its own module under [`crate::cmd`].

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::cmd;

/// Keeps etcd available and safe on Pacemaker clusters, above all two-node ones.
#[derive(Debug, Parser)]
#[command(name = "etcd-warden", version, propagate_version = true)]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the host daemon (supervises etcd, serves the local API).
    Daemon(cmd::daemon::DaemonArgs),
    /// Show this node's state and etcd's live view.
    Status(cmd::status::StatusArgs),
    /// List etcd's members, live.
    Members(cmd::members::MembersArgs),
    /// Save a verified etcd snapshot.
    Snapshot(cmd::snapshot::SnapshotArgs),
    /// Ask the daemon to start etcd on this node.
    Start(cmd::control::StartArgs),
    /// Ask the daemon to stop etcd on this node.
    Stop(cmd::control::StopArgs),
    /// Build the PacemakerCluster report from crm_mon and write it.
    Collect(cmd::collect::CollectArgs),
    /// Evaluate a report into Healthy, Warning or Degraded.
    Health(cmd::health::HealthArgs),
    /// Print the pcs commands that configure a cluster for this agent.
    PcsConfig(cmd::pcs_config::PcsConfigArgs),
    /// Print the crmsh configuration (or CIB XML) for this agent.
    CrmConfig(cmd::pcs_config::CrmConfigArgs),
    /// Pacemaker alert agent: forward CRM_alert_* events to the daemon.
    Alert(cmd::alert::AlertArgs),
    /// Resolve a state the daemon refuses to fix on its own.
    Recover(cmd::recover::RecoverArgs),
    /// Defragment this node's etcd member if the policy allows it now.
    Defrag(cmd::defrag::DefragArgs),
    /// Move etcd's data from /var/lib/etcd/warden to /var/lib/etcd-warden/data
    /// (run by etcd-warden-migrate-data.service before the daemon).
    MigrateData(cmd::migrate_data::MigrateDataArgs),
    /// Write the man pages and shell completions (used by packaging).
    #[command(hide = true)]
    Generate(cmd::generate::GenerateArgs),
}

/// Parse the command line, run the subcommand, and turn its result into the
/// process exit code. An error chain is printed once, here.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Daemon(a) => cmd::daemon::run_daemon(a),
        Command::Status(a) => cmd::status::run_status(a),
        Command::Members(a) => cmd::members::run_members(a),
        Command::Snapshot(a) => cmd::snapshot::run_snapshot(a),
        Command::Start(a) => cmd::control::run_start(a),
        Command::Stop(a) => cmd::control::run_stop(a),
        Command::Collect(a) => cmd::collect::run_collect(a),
        Command::Health(a) => cmd::health::run_health(a),
        Command::PcsConfig(a) => cmd::pcs_config::run_pcsconfig(a),
        Command::CrmConfig(a) => cmd::pcs_config::run_crmconfig(a),
        Command::Alert(a) => cmd::alert::run_alert(a),
        Command::Recover(a) => cmd::recover::run_recover(a),
        Command::Defrag(a) => cmd::defrag::run_defrag(a),
        Command::MigrateData(a) => cmd::migrate_data::run_migrate_data(a),
        Command::Generate(a) => cmd::generate::run_generate(a, &Cli::command()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("etcd-warden: error: {e:#}");
            // A configuration error fails the same way on every restart.
            if crate::config::is_config_error(&e) {
                ExitCode::from(crate::config::EXIT_CONFIG)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
