//! One PacemakerCluster report cycle: run crm_mon (bounded in time and
//! output), read the CIB for fence targets and Corosync's node list for
//! addresses while it runs, carry transition times from the previous report,
//! build the report with `crm_xml::report::build` and write it atomically.
//!
//! Two callers share it, so that their reports never disagree: the
//! `etcd-warden collect` command (a timer runs it on hosts without the
//! daemon) and the daemon, which runs it every `report.interval_ms` and for
//! `/v1/report`. The code is synchronous: the daemon runs it under
//! `spawn_blocking`, and the command has nothing else to do meanwhile.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crm_xml::cib::{FenceTargets, corosync_addresses};
use crm_xml::report::{self, EtcdSection, Options, Report};

use crate::atomic_file::{self, Replace, WriteError};
use crate::config::Settings;
use crate::pacemaker::{CIBADMIN_CMD, CMAPCTL_CMD, CRM_MON_CMD};
use crate::tool::{Running, ToolError};

mod corosync;
mod files;

pub(crate) use crate::tool::DEFAULT_MAX_OUTPUT;
pub(crate) use corosync::addresses_from_file;
use corosync::{ConfState, agreeing_addresses, read_corosync_conf};
pub use crm_xml::cib::corosync_conf;
pub(crate) use files::{ReadError, read_capped, read_previous};

/// The report file's mode. It holds no secret and is meant for dashboards,
/// collectors and `etcd-warden health` running as other users; who may
/// read it is decided by the directory it is written to (the daemon's
/// `/run/etcd-warden` is `0751 root:haclient`: any user reaches a file it
/// names, only the group lists it), not by the service's umask, which keeps
/// its other files private.
pub(crate) const REPORT_MODE: u32 = 0o644;

/// Where Pacemaker's CIB manager stores the CIB on a cluster node.
pub(crate) const LIVE_CIB_FILE: &str = "/var/lib/pacemaker/cib/cib.xml";

/// Where Corosync reads its configuration unless started with `-c`.
pub(crate) const DEFAULT_COROSYNC_CONF: &str = "/etc/corosync/corosync.conf";

/// Largest Corosync configuration or node list accepted.
pub(crate) const MAX_COROSYNC_TEXT: usize = 1024 * 1024;

/// Why a cycle produced no report. Each variant's message is complete (the
/// inner error is part of it, not a separate source), so that the CLI's
/// `{:#}` and the daemon's log print it once.
#[derive(Debug, thiserror::Error)]
pub enum CycleError {
    /// crm_mon could not be run, failed, hung or flooded.
    #[error("crm_mon failed: {0}")]
    CrmMon(ToolError),
    /// crm_mon exited 0 but said it could not read the CIB and showed no
    /// node (it does so with an unreadable `CIB_file`): a report built from
    /// that would claim a cluster without nodes.
    #[error("crm_mon failed: {0}")]
    CrmMonErrors(String),
    /// crm_mon's output is not a document the parser accepts.
    #[error("cannot parse crm_mon output: {0}")]
    ParseCrmMon(crm_xml::ParseError),
    /// The CIB is not a document the parser accepts.
    #[error("cannot parse the CIB: {0}")]
    ParseCib(crm_xml::ParseError),
    /// A file named explicitly could not be read.
    #[error(transparent)]
    Read(ReadError),
    /// A Corosync configuration named explicitly is malformed.
    #[error("{}:{line}: {message}", path.display())]
    CorosyncConf {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong there.
        message: String,
    },
    /// The report could not be written.
    #[error(transparent)]
    Write(WriteError),
}

/// Where the CIB (fence device targets) comes from.
#[derive(Debug, Clone)]
pub(crate) enum CibSource {
    /// This file only; unreadable, the report says fence targets are unknown.
    File(PathBuf),
    /// This file, else this command (the CIB manager's file is cheaper to
    /// read than a cibadmin process competing with crm_mon for the CPU).
    FileOrCommand(PathBuf, Vec<String>),
}

/// Where node addresses come from.
#[derive(Debug, Clone)]
pub(crate) struct CorosyncSource {
    /// The Corosync configuration.
    pub(crate) conf: PathBuf,
    /// Whether it must be readable and well-formed (named by the operator)
    /// rather than a default that may be absent.
    pub(crate) required: bool,
    /// The command printing Corosync's runtime node list.
    pub(crate) cmapctl_cmd: Vec<String>,
}

/// Everything one cycle needs.
#[derive(Debug, Clone)]
pub struct Cycle {
    /// The crm_mon command (no shell).
    pub(crate) crm_mon_cmd: Vec<String>,
    /// Deadline of each external command.
    pub(crate) timeout: Duration,
    /// Largest output accepted from crm_mon or cibadmin, and largest CIB.
    pub(crate) max_output: usize,
    /// The CIB.
    pub(crate) cib: CibSource,
    /// Corosync's node list.
    pub(crate) corosync: CorosyncSource,
    /// The previous report (transition times), if any.
    pub(crate) previous: Option<PathBuf>,
    /// Where the report is written atomically, if anywhere.
    pub(crate) output: Option<PathBuf>,
    /// Agents, expected node count; addresses, fence targets and the etcd
    /// section are filled in by the cycle.
    pub(crate) options: Options,
    /// Addresses of nodes Corosync gives none for (the daemon's configured
    /// peer hosts).
    pub(crate) fallback_addresses: BTreeMap<String, Vec<String>>,
    /// Addresses that replace Corosync's (`collect --node-address`).
    pub(crate) override_addresses: BTreeMap<String, Vec<String>>,
}

/// What the cycle read besides the report options it cannot fill.
#[derive(Debug)]
pub(crate) struct Gathered {
    /// crm_mon's document.
    pub(crate) doc: crm_xml::CrmMon,
    /// Fence device targets, when the CIB could be read.
    pub(crate) fence_targets: Option<FenceTargets>,
    /// Node name → addresses from Corosync.
    pub(crate) node_addresses: BTreeMap<String, Vec<String>>,
    /// The previous report, if there is a usable one.
    pub(crate) previous: Option<Report>,
}

impl Cycle {
    /// The daemon's cycle from its `[report]` settings: its CIB file with
    /// cibadmin as fallback, its Corosync configuration with
    /// corosync-cmapctl as fallback (a daemon has no operator at hand to fix
    /// a flag, so a bad file is a warning, not a failed cycle), and its
    /// configured nodes' peer hosts for nodes Corosync names no address for.
    pub fn for_daemon(settings: &Settings) -> Cycle {
        let r = &settings.report;
        let argv = |c: &[&str]| c.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        Cycle {
            crm_mon_cmd: argv(&CRM_MON_CMD),
            timeout: r.crm_mon_timeout,
            max_output: DEFAULT_MAX_OUTPUT,
            cib: CibSource::FileOrCommand(r.cib_file.clone(), argv(&CIBADMIN_CMD)),
            corosync: CorosyncSource {
                conf: r.corosync_conf.clone(),
                required: false,
                cmapctl_cmd: argv(&CMAPCTL_CMD),
            },
            previous: r.path.clone(),
            output: r.path.clone(),
            options: Options {
                etcd_agents: r.etcd_agents.clone(),
                kubelet_agents: r.kubelet_agents.clone(),
                fence_agents: r.fence_agents.clone(),
                expected_node_count: r.expected_nodes,
                profile: r.profile,
                ..Options::default()
            },
            fallback_addresses: settings
                .nodes
                .iter()
                .map(|n| {
                    let ips: Vec<String> = n.peer_urls.iter().filter_map(|u| url_ip(u)).collect();
                    (n.name.clone(), ips)
                })
                .filter(|(_, ips)| !ips.is_empty())
                .collect(),
            override_addresses: BTreeMap::new(),
        }
    }

    /// Run crm_mon and read the rest while it runs; see [`gather`].
    pub(crate) fn gather(&self, warn: &mut dyn FnMut(&str)) -> Result<Gathered, CycleError> {
        gather(self, warn)
    }

    /// The report from what [`Cycle::gather`] read, with `etcd` embedded.
    pub(crate) fn build(&self, g: Gathered, etcd: Option<EtcdSection>) -> Report {
        let mut opts = self.options.clone();
        opts.fence_targets = g.fence_targets;
        opts.node_addresses = g.node_addresses;
        for (name, addrs) in &self.fallback_addresses {
            let known = opts.node_addresses.get(name).is_some_and(|a| !a.is_empty());
            if !known {
                opts.node_addresses.insert(name.clone(), addrs.clone());
            }
        }
        for (name, addrs) in &self.override_addresses {
            opts.node_addresses.insert(name.clone(), addrs.clone());
        }
        opts.etcd = etcd;
        report::build(
            &g.doc,
            &opts,
            g.previous.as_ref(),
            time::OffsetDateTime::now_utc(),
        )
    }

    /// The whole cycle: gather, build, and write to [`Cycle::output`] when
    /// set. A failed cycle writes nothing, so the previous report stays
    /// whole (and ages into staleness, which `health` reports).
    pub fn run(
        &self,
        etcd: Option<EtcdSection>,
        warn: &mut dyn FnMut(&str),
    ) -> Result<Report, CycleError> {
        let g = self.gather(warn)?;
        let report = self.build(g, etcd);
        if let Some(out) = &self.output {
            atomic_file::write_with_mode(
                out,
                report.to_json().as_bytes(),
                Replace::Fast,
                REPORT_MODE,
            )
            .map_err(CycleError::Write)?;
        }
        Ok(report)
    }
}

/// The IP host of an `http(s)://host:port` URL (a name is no address).
fn url_ip(u: &str) -> Option<String> {
    let rest = u.split_once("://")?.1;
    let rest = rest.split('/').next().unwrap_or(rest);
    let (host, _) = rest.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.parse::<std::net::IpAddr>()
        .ok()
        .map(|ip| ip.to_string())
}

/// Run crm_mon and, while it runs, read everything else: the CIB (fence
/// targets), Corosync's node list (addresses) and the previous report. The
/// cycle then costs about one crm_mon call: no other process is started
/// when the files can be read, and the reading overlaps crm_mon.
///
/// Corosync's node list comes from its configuration file when that file
/// agrees with the membership crm_mon shows (every cluster node there with
/// the same name and node id), because reading a file costs far less than a
/// `corosync-cmapctl` process. When the file is absent, malformed, or
/// disagrees (corosync may run with another file, `-c`), `corosync-cmapctl`
/// is asked, since the runtime is what the cluster uses.
fn gather(c: &Cycle, warn: &mut dyn FnMut(&str)) -> Result<Gathered, CycleError> {
    let max = c.max_output;
    let timeout = c.timeout;
    let crm_mon = Running::spawn(&c.crm_mon_cmd, timeout, max);

    let conf_path = &c.corosync.conf;
    let conf = read_corosync_conf(conf_path, c.corosync.required)?;
    let cmapctl = &c.corosync.cmapctl_cmd;
    // Without a usable file, the runtime is asked at once, alongside crm_mon.
    let mut cmap = match &conf {
        ConfState::Nodes(_) => None,
        ConfState::Unusable(_) => Some(Running::spawn(cmapctl, timeout, MAX_COROSYNC_TEXT)),
    };

    let cib_text: Result<String, String> = match &c.cib {
        CibSource::File(p) => read_capped(p, max).map_err(|e| e.to_string()),
        CibSource::FileOrCommand(p, cmd) => read_capped(p, max).or_else(|_| {
            Running::spawn(cmd, timeout, max)
                .finish()
                .map_err(|e| e.to_string())
        }),
    };
    // Parsed now, while crm_mon runs; a parse error is raised only after
    // crm_mon's own result, which matters more.
    let cib = cib_text.map(|t| FenceTargets::from_cib(&t));
    let previous = match &c.previous {
        Some(p) => read_previous(p, warn),
        None => None,
    };

    let xml = crm_mon.finish().map_err(CycleError::CrmMon)?;
    let doc = crm_xml::parse(&xml).map_err(CycleError::ParseCrmMon)?;
    if doc.nodes.is_empty()
        && let Some(st) = &doc.status
        && !st.errors.is_empty()
    {
        return Err(CycleError::CrmMonErrors(st.errors.join("; ")));
    }

    // Without the CIB the report cannot attribute fence devices; it then
    // says so in FencingAvailable's message rather than guessing.
    let fence_targets = match cib {
        Ok(parsed) => Some(parsed.map_err(CycleError::ParseCib)?),
        Err(e) => {
            warn(&format!("no CIB, fence targets unknown: {e}"));
            None
        }
    };

    let mut problems: Vec<String> = Vec::new();
    let mut from_conf = BTreeMap::new();
    match conf {
        ConfState::Nodes(nodes) => {
            let (agreed, disagreement) = agreeing_addresses(&nodes, &doc);
            match disagreement {
                None => {
                    return Ok(Gathered {
                        doc,
                        fence_targets,
                        node_addresses: agreed,
                        previous,
                    });
                }
                Some(why) => {
                    problems.push(format!("{}: {why}", conf_path.display()));
                    from_conf = agreed;
                    cmap = Some(Running::spawn(cmapctl, timeout, MAX_COROSYNC_TEXT));
                }
            }
        }
        ConfState::Unusable(why) => problems.push(why),
    }
    let node_addresses = match cmap.map(Running::finish) {
        Some(Ok(text)) if text.contains("nodelist.node.") => corosync_addresses(&text),
        other => {
            match other {
                Some(Ok(_)) => problems.push(format!(
                    "{} printed no node list",
                    cmapctl.first().map(String::as_str).unwrap_or_default()
                )),
                Some(Err(e)) => problems.push(e.to_string()),
                None => {}
            }
            // Then only the nodes whose name and id the file shares with
            // crm_mon get addresses: a wrong address is worse than none.
            warn(&format!(
                "no Corosync node list{}: {}",
                if from_conf.is_empty() {
                    ", node addresses unknown"
                } else {
                    ", addresses only of the nodes the configuration agrees on"
                },
                problems.join("; ")
            ));
            from_conf
        }
    };
    Ok(Gathered {
        doc,
        fence_targets,
        node_addresses,
        previous,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::corosync::tests::TWO_NODES;
    use super::*;

    #[test]
    fn peer_url_hosts_are_addresses_only_when_they_are_ips() {
        assert_eq!(
            url_ip("https://192.0.2.1:2380").as_deref(),
            Some("192.0.2.1")
        );
        assert_eq!(
            url_ip("https://[2001:db8::2]:2380/").as_deref(),
            Some("2001:db8::2")
        );
        assert_eq!(url_ip("http://b.example:2380"), None);
        assert_eq!(url_ip("nonsense"), None);
    }

    /// A cycle whose crm_mon prints `xml`, with no CIB and no Corosync.
    fn cycle_printing(dir: &Path, xml: &str) -> Cycle {
        let doc = dir.join("crm_mon.xml");
        std::fs::write(&doc, xml).unwrap();
        Cycle {
            crm_mon_cmd: vec!["cat".into(), doc.display().to_string()],
            timeout: Duration::from_secs(5),
            max_output: DEFAULT_MAX_OUTPUT,
            cib: CibSource::File(dir.join("absent-cib.xml")),
            corosync: CorosyncSource {
                conf: dir.join("absent-corosync.conf"),
                required: false,
                cmapctl_cmd: vec!["false".into()],
            },
            previous: Some(dir.join("report.json")),
            output: Some(dir.join("report.json")),
            options: Options::default(),
            fallback_addresses: [("n1".to_string(), vec!["192.0.2.9".to_string()])].into(),
            override_addresses: BTreeMap::new(),
        }
    }

    #[test]
    fn a_cycle_writes_and_warns_and_uses_fallback_addresses() {
        let d = tempfile::tempdir().unwrap();
        let c = cycle_printing(d.path(), TWO_NODES);
        let mut warnings = Vec::new();
        let r = c.run(None, &mut |w| warnings.push(w.to_owned())).unwrap();
        assert!(
            warnings.iter().any(|w| w.contains("no CIB")),
            "{warnings:?}"
        );
        assert!(
            warnings.iter().any(|w| w.contains("no Corosync node list")),
            "{warnings:?}"
        );
        let n1 = r.status.nodes.iter().find(|n| n.node_name == "n1").unwrap();
        assert_eq!(n1.addresses[0].address, "192.0.2.9");
        let written = std::fs::read_to_string(d.path().join("report.json")).unwrap();
        assert_eq!(Report::from_json(&written).unwrap(), r);
    }

    #[test]
    fn crm_mon_errors_without_nodes_fail_the_cycle_and_write_nothing() {
        let d = tempfile::tempdir().unwrap();
        let xml = r#"<pacemaker-result api-version="2.25" request="crm_mon">
  <status code="0" message="OK">
    <errors>
      <error>Could not connect to the CIB: Update does not conform to the configured schema</error>
    </errors>
  </status>
</pacemaker-result>"#;
        let c = cycle_printing(d.path(), xml);
        std::fs::write(d.path().join("report.json"), "previous").unwrap();
        let e = c.run(None, &mut |_| {}).unwrap_err();
        assert_eq!(
            e.to_string(),
            "crm_mon failed: Could not connect to the CIB: Update does not conform to the configured schema"
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("report.json")).unwrap(),
            "previous"
        );
    }
}
