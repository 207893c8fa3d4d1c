//! Command-line parsing and dispatch. Each subcommand's arguments and code
//! live in its own module under [`crate::cmd`].

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::cmd;

/// Keeps etcd available and safe on Pacemaker clusters, above all two-node ones.
#[derive(Debug, Parser)]
#[command(
    name = "etcd-warden",
    version,
    propagate_version = true,
    after_long_help = EXIT_STATUS
)]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The exit codes every subcommand shares, for `--help` and the man page;
/// a subcommand's own page lists the codes it adds.
const EXIT_STATUS: &str = "Exit status:
  0   success
  1   failure (the message on stderr says what failed)
  2   a usage error (an unknown option, a missing argument); some subcommands add codes (see their pages)
  78  the configuration is refused (EX_CONFIG); stderr names the file, the line and the key";

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the host daemon (supervises etcd, serves the local API).
    Daemon(cmd::daemon::DaemonArgs),
    /// Check the configuration without starting anything (exit 78 when refused).
    CheckConfig(cmd::check_config::CheckConfigArgs),
    /// Show this node's state and etcd's live view.
    Status(cmd::status::StatusArgs),
    /// List etcd's members, live.
    Members(cmd::members::MembersArgs),
    /// Run etcdctl against this node's etcd with the configured endpoint and TLS files.
    Etcdctl(cmd::etcdctl::EtcdctlArgs),
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
    /// Make the daemon read its configuration again (systemctl reload).
    Reload(cmd::reload::ReloadArgs),
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
        Command::CheckConfig(a) => cmd::check_config::run_check_config(a),
        Command::Status(a) => cmd::status::run_status(a),
        Command::Members(a) => cmd::members::run_members(a),
        Command::Etcdctl(a) => cmd::etcdctl::run_etcdctl(a),
        Command::Snapshot(a) => cmd::snapshot::run_snapshot(a),
        Command::Start(a) => cmd::control::run_start(a),
        Command::Stop(a) => cmd::control::run_stop(a),
        Command::Collect(a) => cmd::collect::run_collect(a),
        Command::Health(a) => cmd::health::run_health(a),
        Command::PcsConfig(a) => cmd::pcs_config::run_pcsconfig(a),
        Command::CrmConfig(a) => cmd::pcs_config::run_crmconfig(a),
        Command::Alert(a) => cmd::alert::run_alert(a),
        Command::Reload(a) => cmd::reload::run_reload(a),
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

    /// The documents an operator follows.
    const DOCS: [&str; 6] = [
        "README.md",
        "docs/operations.md",
        "docs/daemon.md",
        "docs/configuration.md",
        "docs/report.md",
        "docs/agent.md",
    ];

    fn doc(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The commands a Markdown text shows: each line of a fenced block
    /// (a leading `# ` prompt removed) and each inline code span, with
    /// line breaks and continuation backslashes removed.
    fn commands(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut prose = String::new();
        let mut fenced = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            if fenced {
                let l = line.trim();
                out.push(l.strip_prefix("# ").unwrap_or(l).to_string());
            } else {
                prose.push_str(line);
                prose.push('\n');
            }
        }
        out.extend(prose.split('`').skip(1).step_by(2).map(str::to_string));
        out.iter()
            .map(|c| c.replace("\\\n", " ").replace('\n', " "))
            .collect()
    }

    /// Why `command` (an `etcd-warden ...` line) names a subcommand or a
    /// long option the CLI does not have, if it does. Values, synopsis
    /// brackets and placeholders are passed over; the walk ends at a shell
    /// operator or at `etcdctl`, whose arguments are etcdctl's.
    fn unknown_part(command: &str) -> Option<String> {
        let mut cmd = Cli::command();
        cmd.build();
        for token in command.split_whitespace().skip(1) {
            let token = token.trim_matches(|c| matches!(c, '[' | ']' | '(' | ')'));
            if matches!(token, "|" | "\\|" | "&" | "&&" | ";") || token.starts_with("$(") {
                break;
            }
            if let Some(long) = token.strip_prefix("--") {
                let long = long.split(['=', '|']).next().unwrap_or_default();
                let known = long.is_empty()
                    || cmd.get_arguments().any(|a| {
                        a.get_long() == Some(long)
                            || a.get_all_aliases().is_some_and(|v| v.contains(&long))
                    });
                if !known {
                    return Some(format!("`{}` has no option --{long}", cmd.get_name()));
                }
                continue;
            }
            if let Some(sub) = cmd.find_subcommand(token).cloned() {
                if sub.get_name() == "etcdctl" {
                    break;
                }
                cmd = sub;
            } else if cmd.has_subcommands() && cmd.get_name() == "etcd-warden" {
                return Some(format!("no subcommand {token:?}"));
            }
        }
        None
    }

    #[test]
    fn every_command_the_documents_show_names_real_subcommands_and_options() {
        let mut checked = 0;
        let mut wrong = Vec::new();
        for name in DOCS {
            for c in commands(&doc(name)) {
                if !c.starts_with("etcd-warden ") {
                    continue;
                }
                checked += 1;
                if let Some(why) = unknown_part(&c) {
                    wrong.push(format!("{name}: `{c}`: {why}"));
                }
            }
        }
        assert!(checked > 50, "only {checked} commands found");
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        // The check itself finds what is wrong.
        assert!(unknown_part("etcd-warden statuss").is_some());
        assert!(unknown_part("etcd-warden status --jsn").is_some());
        assert!(unknown_part("etcd-warden recover restore-archive --nod N").is_some());
        assert!(unknown_part("etcd-warden etcdctl --write-out=json get k").is_none());
    }

    /// A bare etcdctl reaches 127.0.0.1:2379 without TLS: the runbook uses
    /// `etcd-warden etcdctl`, and plain etcdctl only for snapshot files or
    /// with the endpoint of a throw-away etcd written out.
    #[test]
    fn the_runbook_runs_etcdctl_through_etcd_warden() {
        for c in commands(&doc("docs/operations.md")) {
            let Some(at) = c.find("etcdctl ") else {
                continue;
            };
            if c[..at].ends_with("etcd-warden ") {
                continue;
            }
            let args = &c[at..];
            assert!(
                args.starts_with("etcdctl snapshot ") || args.contains("--endpoints"),
                "docs/operations.md runs a bare etcdctl against the default endpoint: `{c}`"
            );
        }
    }
}
