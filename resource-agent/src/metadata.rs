//! The agent's meta-data XML.
//!
//! It must be valid under two schemas at once: the OCF 1.0 DTD
//! (`ra-api-1.dtd`, which ocf-tester checks with `xmllint --valid` and which
//! needs the DOCTYPE) and the OCF 1.1 RelaxNG schema. The intersection rules
//! out `reload-agent`, `reloadable`, `unique-group`, `select` content (DTD)
//! and `time` content or a `longdesc` without `lang` (RNG).
//!
//! The `<version>` element says 1.0 on purpose: Pacemaker uses the legacy
//! `reload` action (reload instead of restart when only non-unique
//! parameters changed) only for agents below OCF 1.1; for 1.1 agents it
//! wants `reload-agent`, which the DTD rejects. Everything else the agent
//! does (exit codes 190/191, promotable roles) follows OCF 1.1.

use std::fmt::Write as _;

use crate::spec::{ACTIONS, AGENT_NAME, PARAMS};

/// The OCF version the meta-data declares (see the module comment).
pub const DECLARED_OCF_VERSION: &str = "1.0";

/// The meta-data document.
pub fn metadata() -> String {
    let mut x = String::with_capacity(4096);
    x.push_str("<?xml version=\"1.0\"?>\n");
    x.push_str("<!DOCTYPE resource-agent SYSTEM \"ra-api-1.dtd\">\n");
    let _ = writeln!(
        x,
        "<resource-agent name=\"{AGENT_NAME}\" version=\"{}\">",
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(x, "<version>{DECLARED_OCF_VERSION}</version>");
    let _ = writeln!(
        x,
        "<longdesc lang=\"en\">{}</longdesc>",
        escape(
            "Runs etcd on this node through the etcd-warden daemon. The agent is a thin client \
             of the daemon's local API: the daemon supervises etcd, checks quorum live and makes \
             every membership and failover decision (including a one-member restart with \
             --force-new-cluster on a two-node cluster, only after Pacemaker has fenced the \
             peer). Configure it as an anonymous clone with notify=true and interleave=true; \
             `etcd-warden pcs-config` and `etcd-warden crm-config` print a complete \
             configuration. Monitor depth 0 checks the process and a live Status of the local \
             member; depth 10 also does a linearizable read."
        )
    );
    x.push_str("<shortdesc lang=\"en\">etcd managed by the etcd-warden daemon</shortdesc>\n");
    x.push_str("<parameters>\n");
    for p in PARAMS {
        let _ = writeln!(
            x,
            "<parameter name=\"{}\" unique=\"{}\" required=\"0\">",
            p.name,
            u8::from(p.unique)
        );
        let _ = writeln!(x, "<longdesc lang=\"en\">{}</longdesc>", escape(p.longdesc));
        let _ = writeln!(
            x,
            "<shortdesc lang=\"en\">{}</shortdesc>",
            escape(p.shortdesc)
        );
        let _ = writeln!(
            x,
            "<content type=\"{}\" default=\"{}\"/>",
            p.kind.as_str(),
            escape(p.default)
        );
        x.push_str("</parameter>\n");
    }
    x.push_str("</parameters>\n<actions>\n");
    for a in ACTIONS {
        let _ = write!(
            x,
            "<action name=\"{}\" timeout=\"{}s\"",
            a.name, a.timeout_s
        );
        if let Some(i) = a.interval_s {
            let _ = write!(x, " interval=\"{i}s\"");
        }
        if let Some(d) = a.depth {
            let _ = write!(x, " depth=\"{d}\"");
        }
        x.push_str("/>\n");
    }
    x.push_str("</actions>\n</resource-agent>\n");
    x
}

/// Escapes text for an XML attribute or element.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declares_doctype_and_every_action() {
        let m = metadata();
        assert!(m.contains("<!DOCTYPE resource-agent SYSTEM \"ra-api-1.dtd\">"));
        for name in [
            "start",
            "stop",
            "monitor",
            "promote",
            "demote",
            "notify",
            "reload",
            "meta-data",
            "validate-all",
        ] {
            assert!(
                m.contains(&format!("<action name=\"{name}\"")),
                "{name} missing"
            );
        }
        // OCF 1.1 only: rejected by ra-api-1.dtd.
        assert!(!m.contains("reload-agent"));
        assert!(!m.contains("reloadable"));
        assert!(m.contains("depth=\"10\""));
        assert!(m.contains("depth=\"0\""));
    }

    #[test]
    fn every_parameter_has_type_default_and_uniqueness() {
        let m = metadata();
        for p in PARAMS {
            let start = m.find(&format!("<parameter name=\"{}\"", p.name)).unwrap();
            let end = start + m[start..].find("</parameter>").unwrap();
            let block = &m[start..end];
            assert!(block.contains("unique=\"0\""), "{block}");
            assert!(block.contains(&format!("type=\"{}\"", p.kind.as_str())));
            assert!(block.contains(&format!("default=\"{}\"", p.default)));
        }
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
