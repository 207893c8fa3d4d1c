//! The agent's meta-data XML.
//!
//! It declares OCF 1.1, as the agent behaves (exit codes 190, `reload-agent`,
//! `reloadable` parameters), and must be valid under two schemas at once:
//! the OCF 1.1 RelaxNG schema and the OCF 1.0 DTD (`ra-api-1.dtd`), which
//! ocf-tester checks with `xmllint --valid` and which needs the DOCTYPE.
//! The DTD predates `reload-agent` and `reloadable`; the DOCTYPE's internal
//! subset declares them. A parser reads the internal subset before the
//! external DTD, and the first declaration of an attribute binds, so the
//! action names the document may use are exactly the ones below.
//!
//! Pacemaker applies a changed parameter of an OCF 1.1 agent with
//! `reload-agent` when the parameter is `reloadable="1"`, instead of
//! stopping and starting every clone instance at once. What the
//! intersection of the two schemas still rules out: `unique-group` and
//! `select` content (DTD), `time` content and a `longdesc` without `lang`
//! (RNG).

use std::fmt::Write as _;

use crate::spec::{ACTIONS, AGENT_NAME, PARAMS};

/// The OCF version the meta-data declares.
pub const DECLARED_OCF_VERSION: &str = "1.1";

/// The DOCTYPE: the OCF 1.0 DTD, with an internal subset that adds OCF 1.1's
/// `reloadable` and lists the advertised actions.
fn doctype() -> String {
    let mut names: Vec<&str> = Vec::new();
    for a in ACTIONS {
        if !names.contains(&a.name) {
            names.push(a.name);
        }
    }
    format!(
        "<!DOCTYPE resource-agent SYSTEM \"ra-api-1.dtd\" [\n\
         <!ATTLIST parameter reloadable (1|0) #IMPLIED>\n\
         <!ATTLIST action name ({}) #REQUIRED>\n\
         ]>\n",
        names.join("|")
    )
}

/// The meta-data document.
pub fn metadata() -> String {
    let mut x = String::with_capacity(4096);
    x.push_str("<?xml version=\"1.0\"?>\n");
    x.push_str(&doctype());
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
             peer). Configure it as an anonymous clone (not promotable) with notify=true and interleave=true; \
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
            "<parameter name=\"{}\" unique=\"{}\" required=\"0\" reloadable=\"{}\">",
            p.name,
            u8::from(p.unique),
            u8::from(p.reloadable)
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
    fn declares_ocf_1_1_and_only_the_actions_the_agent_has() {
        let m = metadata();
        assert!(m.contains("<!DOCTYPE resource-agent SYSTEM \"ra-api-1.dtd\" ["));
        assert!(m.contains("<version>1.1</version>"));
        let advertised: Vec<&str> = m
            .split("<action name=\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .collect();
        for name in [
            "start",
            "stop",
            "monitor",
            "notify",
            "reload-agent",
            "meta-data",
            "validate-all",
        ] {
            assert!(advertised.contains(&name), "{name} missing: {advertised:?}");
        }
        for name in ["promote", "demote", "reload"] {
            assert!(!advertised.contains(&name), "{name} advertised");
        }
        // The internal subset enumerates exactly the advertised names.
        let subset = "<!ATTLIST action name (start|stop|monitor|notify|reload-agent|meta-data|validate-all) #REQUIRED>";
        assert!(m.contains(subset), "{m}");
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
            assert!(block.contains("reloadable=\"1\""), "{block}");
            assert!(block.contains(&format!("type=\"{}\"", p.kind.as_str())));
            assert!(block.contains(&format!("default=\"{}\"", p.default)));
        }
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
