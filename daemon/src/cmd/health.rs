//! `etcd-warden health --report FILE`: the operator-side check of a report.
//! Exit 0 healthy, 1 warning, 2 degraded, 3 unknown (report unreadable). The
//! evaluation is `crm_xml::health::evaluate`, usable by an operator in Rust.

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

/// The exit codes, for `--help` and the man page.
const EXIT_STATUS: &str = "Exit status:
  0   Healthy
  1   Warning
  2   Degraded
  3   Unknown: the report cannot be read, or was built with another profile";

/// Arguments: Evaluate a report into Healthy, Warning or Degraded.
#[derive(Debug, clap::Args)]
#[command(after_long_help = EXIT_STATUS)]
pub(crate) struct HealthArgs {
    /// The report written by `etcd-warden collect`.
    #[arg(long, value_name = "FILE")]
    pub(crate) report: PathBuf,

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

/// Evaluate a report into Healthy, Warning or Degraded.
pub(crate) fn run_health(args: HealthArgs) -> anyhow::Result<ExitCode> {
    // Every failure is "unknown" (3), never the generic 1 that means Warning.
    let report = std::fs::read_to_string(&args.report)
        .map_err(|e| format!("cannot read {}: {e}", args.report.display()))
        .and_then(|t| Report::from_json(&t).map_err(|e| format!("{}: {e}", args.report.display())));
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
                args.report.display(),
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
        println!("Unknown: {msg}");
    }
    ExitCode::from(Verdict::Unknown.exit_code())
}
