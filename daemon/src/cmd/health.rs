//! `etcd-warden health [--report FILE]`: the operator-side check of a report
//! (by default the one the configuration's `[report] path` names), its first
//! line `STATE - finding | perfdata` as monitoring plugins print it. Exit 0
//! healthy, 1 warning, 2 degraded, 3 unknown (no report, or unreadable), 78
//! a refused configuration. The evaluation is `crm_xml::health::evaluate`,
//! usable by an operator in Rust.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crm_xml::health::{self, Thresholds, Verdict};
use crm_xml::report::{Profile, Report};

/// The report profile, as `collect --profile` and `health --profile` take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProfileArg {
    /// Any Pacemaker cluster: every member node whatever its name, kubelet
    /// judged only where a kubelet resource is configured, every fence
    /// device listed; etcd and fencing always judged.
    Generic,
    /// OpenShift: the status is valid for the PacemakerCluster CRD (RFC 1123
    /// node names, global-unicast addresses, at most 5 nodes, Redfish/IPMI
    /// fence devices) and kubelet is judged on every node.
    Openshift,
}

impl From<ProfileArg> for Profile {
    fn from(p: ProfileArg) -> Self {
        match p {
            ProfileArg::Generic => Profile::Generic,
            ProfileArg::Openshift => Profile::OpenShift,
        }
    }
}

/// Output format.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Format {
    /// One line for the verdict, one per finding.
    Text,
    /// The evaluation as JSON.
    Json,
}

/// The exit codes, the first line's form and the files, for `--help` and
/// the man page (EXIT STATUS and FILES).
const EXIT_STATUS: &str = "Exit status:
  0   HEALTHY (a monitoring plugin's OK)
  1   WARNING
  2   DEGRADED (a monitoring plugin's CRITICAL)
  3   UNKNOWN: no report is configured, it cannot be read, or it was built with another profile
  78  the configuration is refused (EX_CONFIG); stderr names the file, the line and the key

The text output's first line follows the monitoring-plugin convention, `STATE - finding | perfdata`: STATE is the verdict word of the exit status above, the finding the most severe one (and how many more), the performance data `age` (seconds since the report's lastUpdated; critical past --stale-after), `nodes_online` (of the member nodes), `etcd_voters` and `etcd_learners` (when the report has an etcd section) and `findings`. One line per finding follows, most severe first. --format json is unchanged by this.

Files:
  /etc/etcd-warden/config.toml  the configuration (and its config.d drop-ins) whose [report] path names the report read without --report; the monitoring user must be able to read it
  /run/etcd-warden/report.json  where the daemon writes the report when [report] path says so (the packaged example's value): mode 0644 in the unit's 0751 runtime directory, so that any user reads it by its name
  /run/etcd-warden-report/pacemakercluster.json  the report of etcd-warden-collect.timer, on hosts without the daemon (give it with --report)";

/// Arguments: Evaluate a report into Healthy, Warning or Degraded.
#[derive(Debug, clap::Args)]
#[command(after_long_help = EXIT_STATUS)]
pub(crate) struct HealthArgs {
    /// The report, as `etcd-warden collect` or the daemon writes it
    /// (default: the configuration's `[report] path`).
    #[arg(long, value_name = "FILE")]
    pub(crate) report: Option<PathBuf>,

    /// The configuration whose `[report] path` is read when --report is not
    /// given (with its layers, as the daemon reads it).
    #[arg(long, value_name = "PATH", default_value = crate::config::DEFAULT_CONFIG)]
    pub(crate) config: PathBuf,

    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub(crate) format: Format,

    /// A report older than this (seconds, from its own lastUpdated) degrades.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub(crate) stale_after: u64,

    /// The profile the report must have been built with (`collect
    /// --profile`); a report of another profile is Unknown (exit 3). Default:
    /// the profile recorded in the report (`openshift` for reports written
    /// before profiles existed).
    #[arg(long, value_enum, value_name = "PROFILE")]
    pub(crate) profile: Option<ProfileArg>,
}

/// The report to read: `--report`, else the configuration's `[report]
/// path`. A configuration that does not load is an error (exit 78); one
/// that names no report is said so (`Err` with the message).
fn report_path(args: &HealthArgs) -> anyhow::Result<Result<PathBuf, String>> {
    if let Some(p) = &args.report {
        return Ok(Ok(p.clone()));
    }
    let settings = crate::config::load(&args.config)?;
    Ok(settings.report.path.ok_or_else(|| {
        format!(
            "the configuration ({}) sets no [report] path, so the daemon writes no report: give --report FILE, or set [report] path",
            args.config.display()
        )
    }))
}

/// Evaluate a report into Healthy, Warning or Degraded.
pub(crate) fn run_health(args: HealthArgs) -> anyhow::Result<ExitCode> {
    // Every failure but a refused configuration is "unknown" (3), never the
    // generic 1 that means Warning.
    let path = match report_path(&args)? {
        Ok(p) => p,
        Err(msg) => return Ok(unknown(args.format, &msg)),
    };
    let report = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
        .and_then(|t| Report::from_json(&t).map_err(|e| format!("{}: {e}", path.display())));
    let report = match report {
        Ok(r) => r,
        Err(msg) => return Ok(unknown(args.format, &msg)),
    };
    let th = Thresholds {
        stale_after: Duration::from_secs(args.stale_after),
        ..Thresholds::default()
    };
    let profile = args.profile.map_or(report.profile, Profile::from);
    let eval = match health::evaluate_as(&report, profile, time::OffsetDateTime::now_utc(), &th) {
        Ok(e) => e,
        Err(e) => {
            let msg = format!(
                "{}: {e}: evaluate it with --profile {}, or build it with `etcd-warden collect --profile {}`",
                path.display(),
                e.found,
                e.expected
            );
            return Ok(unknown(args.format, &msg));
        }
    };
    match args.format {
        Format::Text => print!("{}", health::to_text(&eval)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&eval)?),
    }
    Ok(ExitCode::from(eval.verdict.exit_code()))
}

/// Say why the verdict is Unknown, on stderr and in the chosen format.
fn unknown(format: Format, msg: &str) -> ExitCode {
    eprintln!("etcd-warden: health: {msg}");
    if let Format::Json = format {
        println!(
            "{}",
            serde_json::json!({"verdict": "Unknown", "error": msg})
        );
    } else {
        println!("{} - {}", Verdict::Unknown.label(), msg.replace('|', "/"));
    }
    ExitCode::from(Verdict::Unknown.exit_code())
}
