//! `etcd-warden etcdctl ARGS…`: etcdctl with this node's client endpoint
//! and TLS files from the configuration, so that an operator never types
//! them (a bare `etcdctl` talks to 127.0.0.1:2379 without TLS). The
//! etcdctl beside the configured etcd binary (the same release) is
//! preferred, else the one on PATH; it replaces this process.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::anyhow;

use crate::config::Settings;

/// Arguments: Run etcdctl against this node's etcd with the configured TLS files.
#[derive(Debug, clap::Args)]
pub(crate) struct EtcdctlArgs {
    /// The main configuration file (with its layers, as the daemon reads it).
    #[arg(long, value_name = "PATH", default_value = crate::config::DEFAULT_CONFIG)]
    pub(crate) config: PathBuf,
    /// A standalone directory (see `etcd-warden daemon --standalone`).
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    pub(crate) standalone: Option<PathBuf>,
    /// etcdctl's own arguments, e.g. `endpoint status -w table` (put `--`
    /// first when the first one starts with `-`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ETCDCTL ARGS"
    )]
    pub(crate) args: Vec<OsString>,
}

/// The etcdctl command for `settings`: ETCDCTL_API=3, this node's first
/// client URL, and its client TLS files when there are any.
pub(crate) fn command(settings: &Settings, etcdctl: PathBuf, args: &[OsString]) -> Command {
    let mut cmd = Command::new(etcdctl);
    cmd.env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", settings.local_client_url()));
    if let Some(t) = &settings.etcd.client_tls {
        cmd.arg(format!("--cacert={}", t.trusted_ca_file.display()))
            .arg(format!("--cert={}", t.cert_file.display()))
            .arg(format!("--key={}", t.key_file.display()));
    }
    cmd.args(args);
    cmd
}

/// Replace this process with etcdctl; returns only when it cannot start.
pub(crate) fn run_etcdctl(args: EtcdctlArgs) -> anyhow::Result<ExitCode> {
    let settings = super::target::settings(&args.config, args.standalone.as_deref())?;
    let etcdctl = crate::recover::find_etcd_tool(&settings.etcd.binary, &["etcdctl"]).ok_or_else(
        || {
            anyhow!(
                "etcdctl found neither beside {} nor on PATH: install etcd's client tools (Debian: etcd-client)",
                settings.etcd.binary.display()
            )
        },
    )?;
    let e = command(&settings, etcdctl.clone(), &args.args).exec();
    Err(anyhow!("cannot run {}: {e}", etcdctl.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command as Sub};
    use clap::Parser;

    fn parsed(argv: &[&str]) -> EtcdctlArgs {
        let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let Sub::Etcdctl(a) = cli.command else {
            panic!("{argv:?}: not etcdctl");
        };
        a
    }

    #[test]
    fn etcdctl_flags_after_the_first_argument_are_etcdctls() {
        let a = parsed(&[
            "etcd-warden",
            "etcdctl",
            "--config",
            "/x/c.toml",
            "endpoint",
            "status",
            "-w",
            "table",
            "--cluster",
        ]);
        assert_eq!(a.config, PathBuf::from("/x/c.toml"));
        assert_eq!(a.args, ["endpoint", "status", "-w", "table", "--cluster"]);
        let a = parsed(&[
            "etcd-warden",
            "etcdctl",
            "--",
            "--write-out=json",
            "get",
            "k",
        ]);
        assert_eq!(a.args, ["--write-out=json", "get", "k"]);
    }

    #[test]
    fn the_command_carries_the_endpoint_and_the_client_tls_files() {
        let texts = [(
            PathBuf::from("/c.toml"),
            r#"node_name = "a"
topology = "ha"
[[nodes]]
name = "a"
peer_urls = ["http://192.0.2.1:2380"]
client_urls = ["https://192.0.2.1:2379", "unix://localhost:2379"]
[etcd]
user = "root"
[tls.client]
cert_file = "/p/c.crt"
key_file = "/p/c.key"
trusted_ca_file = "/p/ca.crt"
"#
            .to_string(),
        )];
        let s = crate::config::from_texts(&texts).unwrap();
        let cmd = command(&s, "/usr/bin/etcdctl".into(), &["get".into(), "k".into()]);
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
        assert_eq!(
            args,
            [
                "--endpoints=https://192.0.2.1:2379",
                "--cacert=/p/ca.crt",
                "--cert=/p/c.crt",
                "--key=/p/c.key",
                "get",
                "k"
            ]
        );
        let env: Vec<_> = cmd.get_envs().collect();
        assert_eq!(env, [("ETCDCTL_API".as_ref(), Some("3".as_ref()))]);
    }
}
