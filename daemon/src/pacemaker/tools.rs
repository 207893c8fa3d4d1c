//! The real Pacemaker: its command-line tools (crm_mon, crm_attribute,
//! crm_resource, cibadmin), each run by the one bounded runner
//! ([`crate::tool`]).

use std::time::Duration;

use crm_xml::model::CrmMon;

use super::{Pacemaker, PcmkError};
use crate::tool;

/// The real Pacemaker command-line tools.
#[derive(Debug, Clone, Default)]
pub struct CrmTools;

/// crm_attribute's "no such attribute" exit codes: CRM_EX_NOSUCH (105), and
/// 6 from older releases. Not an error: the attribute is absent, an ordinary
/// answer (most transient attributes are absent most of the time).
const NOT_FOUND: [i32; 2] = [105, 6];

/// Runs a Pacemaker tool: its exit code, stdout and failure reason.
async fn run(
    tool: &'static str,
    args: &[&str],
    deadline: Duration,
) -> Result<(Option<i32>, String, String), PcmkError> {
    let argv: Vec<&str> = std::iter::once(tool).chain(args.iter().copied()).collect();
    let out = tool::run_async(&argv, deadline, tool::DEFAULT_MAX_OUTPUT).await?;
    Ok((
        out.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.reason(),
    ))
}

#[async_trait::async_trait]
impl Pacemaker for CrmTools {
    async fn crm_mon(&self, deadline: Duration) -> Result<CrmMon, PcmkError> {
        // --fence-history=3 adds <fence_history> with every event (2.1.5
        // shows only failures at the default level 1).
        let (code, out, err) = run(
            "crm_mon",
            &[
                "--one-shot",
                "--inactive",
                "--output-as=xml",
                "--fence-history=3",
            ],
            deadline,
        )
        .await?;
        if code != Some(0) {
            return Err(PcmkError::Failed {
                tool: "crm_mon",
                code,
                message: err,
            });
        }
        crm_xml::parse(&out).map_err(|e| PcmkError::Parse {
            what: "crm_mon's XML".into(),
            message: e.to_string(),
        })
    }

    async fn get_attr(
        &self,
        node: &str,
        name: &str,
        deadline: Duration,
    ) -> Result<Option<String>, PcmkError> {
        let out = transient_attr(node, name, &["--query", "--quiet"], deadline).await?;
        Ok(out.map(|o| o.trim().to_string()).filter(|s| !s.is_empty()))
    }

    async fn set_attr(
        &self,
        node: &str,
        name: &str,
        value: &str,
        deadline: Duration,
    ) -> Result<(), PcmkError> {
        match transient_attr(node, name, &["--update", value], deadline).await? {
            Some(_) => Ok(()),
            // An update never answers "not found"; if it does, it failed.
            None => Err(PcmkError::Failed {
                tool: "crm_attribute",
                code: None,
                message: format!("update of {name} on {node} answered 'not found'"),
            }),
        }
    }

    async fn delete_attr(
        &self,
        node: &str,
        name: &str,
        deadline: Duration,
    ) -> Result<(), PcmkError> {
        // Deleting an absent attribute is done already.
        transient_attr(node, name, &["--delete"], deadline)
            .await
            .map(|_| ())
    }

    async fn clear_failed_start(
        &self,
        resource: &str,
        node: &str,
        deadline: Duration,
    ) -> Result<(), PcmkError> {
        let args = [
            "--cleanup",
            "--resource",
            resource,
            "--node",
            node,
            "--operation",
            "start",
            "--interval",
            "0",
        ];
        match run("crm_resource", &args, deadline).await? {
            (Some(0), _, _) => Ok(()),
            (code, _, message) => Err(PcmkError::Failed {
                tool: "crm_resource",
                code,
                message,
            }),
        }
    }

    async fn fence_race_winner(
        &self,
        nodes: &[String],
        deadline: Duration,
    ) -> Result<Option<String>, PcmkError> {
        let (code, out, err) =
            run("cibadmin", &["--query", "--scope", "resources"], deadline).await?;
        if code != Some(0) {
            return Err(PcmkError::Failed {
                tool: "cibadmin",
                code,
                message: err,
            });
        }
        // Unparsable configuration: no preference (it decides no safety).
        Ok(crm_xml::cib::FenceTargets::from_cib(&out)
            .ok()
            .and_then(|t| t.fence_race_winner(nodes)))
    }
}

/// Runs `crm_attribute` on a reboot-lifetime (transient) node attribute.
/// `Some(stdout)` on success, `None` when Pacemaker says the attribute does
/// not exist (rc 105, or 6 on older versions), an error otherwise.
async fn transient_attr(
    node: &str,
    name: &str,
    op: &[&str],
    deadline: Duration,
) -> Result<Option<String>, PcmkError> {
    let mut args = vec!["--lifetime", "reboot", "--node", node, "--name", name];
    args.extend_from_slice(op);
    let (code, out, err) = run("crm_attribute", &args, deadline).await?;
    match code {
        Some(0) => Ok(Some(out)),
        Some(c) if NOT_FOUND.contains(&c) => Ok(None),
        code => Err(PcmkError::Failed {
            tool: "crm_attribute",
            code,
            message: err,
        }),
    }
}
