//! `etcd-warden reload` (`systemctl reload etcd-warden`): the daemon reads
//! its configuration files again, applies what a running daemon can, and
//! says when each other change takes effect and the command that makes it.

use std::process::ExitCode;

use warden_api::{ReloadReply, paths};

use super::target::Target;

/// Arguments: Make the daemon read its configuration again.
#[derive(Debug, clap::Args)]
#[command(after_long_help = EXIT_STATUS)]
pub(crate) struct ReloadArgs {
    /// Where the daemon is.
    #[command(flatten)]
    pub(crate) target: Target,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The exit codes, for `--help` and the man page.
const EXIT_STATUS: &str = "Exit status:
  0   the files were read: what a running daemon can apply is applied, the rest is named with the command that applies it
  1   the daemon could not be asked
  78  the configuration is refused (EX_CONFIG), here or by the daemon; stderr names the file, the line and the key, and the daemon runs on unchanged";

/// Ask the daemon to reload; print what changed and when it takes effect.
pub(crate) fn run_reload(args: ReloadArgs) -> anyhow::Result<ExitCode> {
    // The files are checked here first, as the daemon will read them: a
    // refused file is named with its line and key (exit 78) before the
    // daemon is asked anything.
    let node = match &args.target.socket {
        None => Some(args.target.settings()?.node_name),
        Some(_) => None,
    };
    let r: ReloadReply = args.target.post(paths::RELOAD, &serde_json::json!({}))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    }
    if let Some(why) = &r.refused {
        eprintln!(
            "etcd-warden: reload: the daemon refused the configuration and runs on unchanged: {why}"
        );
        return Ok(ExitCode::from(crate::config::EXIT_CONFIG));
    }
    if !args.json {
        print!("{}", summary(&r, node.as_deref().unwrap_or("NODE")));
    }
    Ok(ExitCode::SUCCESS)
}

/// What the reload did and what is left, one line per group of keys.
pub(crate) fn summary(r: &ReloadReply, node: &str) -> String {
    let mut out = format!("read {}\n", r.sources.join(", "));
    let groups = [
        (&r.applied, "applied now".to_string()),
        (
            &r.at_daemon_restart,
            "take effect when the daemon restarts (etcd keeps running): `systemctl restart etcd-warden`".to_string(),
        ),
        (
            &r.at_etcd_restart,
            format!(
                "take effect when etcd restarts on this node, which a restarted daemon does when etcd's configuration changed; one node at a time: `pcs node standby {node}`, `systemctl restart etcd-warden`, `pcs node unstandby {node}`, then wait until `etcd-warden status` shows two voters"
            ),
        ),
        (
            &r.identity,
            "name this node, its cluster or where its data lives, and are read only when the daemon starts: a running member keeps them; see \"Reloading\" in docs/configuration.md".to_string(),
        ),
    ];
    let mut any = false;
    for (keys, what) in groups {
        if !keys.is_empty() {
            any = true;
            out.push_str(&format!("{}: {what}\n", keys.join(", ")));
        }
    }
    if !any {
        out.push_str("no change: the daemon runs with what the files say\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_group_names_its_keys_and_command() {
        let r = ReloadReply {
            sources: vec!["/etc/etcd-warden/config.toml".into()],
            applied: vec!["defrag.enabled".into()],
            at_etcd_restart: vec!["etcd.quota_backend_bytes".into()],
            ..ReloadReply::default()
        };
        let s = summary(&r, "node1");
        assert!(s.starts_with("read /etc/etcd-warden/config.toml\n"), "{s}");
        assert!(s.contains("defrag.enabled: applied now\n"), "{s}");
        assert!(
            s.contains("etcd.quota_backend_bytes: take effect when etcd restarts on this node"),
            "{s}"
        );
        assert!(s.contains("`pcs node standby node1`"), "{s}");
        assert!(!s.contains("no change"), "{s}");
    }

    #[test]
    fn no_change_is_said() {
        let s = summary(&ReloadReply::default(), "node1");
        assert!(
            s.ends_with("no change: the daemon runs with what the files say\n"),
            "{s}"
        );
    }
}
