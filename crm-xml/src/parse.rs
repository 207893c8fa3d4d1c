//! From the element tree to the typed model. Unknown elements and attributes
//! are ignored (crm_mon grows new ones every release); what the model needs
//! is validated, and every error names the element path and line:column.

use std::collections::BTreeMap;

use time::UtcOffset;

use crate::error::{Location, ParseError, line_column, truncate};
use crate::model::{
    Ban, Bundle, Clone, ClusterOptions, CrmMon, Dc, Failure, FenceEvent, FenceHistory, FenceStatus,
    Format, Group, Node, NodeHistory, NodeType, Operation, Primitive, Replica, Resource,
    ResourceHistory, ResultStatus, Role, Summary, Ticket,
};
use crate::timefmt::parse_pacemaker_time;
use crate::xml::{Element, parse_tree};

/// Parse a crm_mon XML document (either root). Never panics; see the fuzz
/// target and property tests.
pub fn parse(input: &str) -> Result<CrmMon, ParseError> {
    let doc = parse_tree(input)?;
    let cx = Cx { input };
    cx.document(Element::root(&doc))
}

/// Parse raw bytes: the document must be UTF-8 (crm_mon always writes UTF-8).
pub fn parse_bytes(input: &[u8]) -> Result<CrmMon, ParseError> {
    match std::str::from_utf8(input) {
        Ok(s) => parse(s),
        Err(e) => {
            let s = String::from_utf8_lossy(&input[..e.valid_up_to()]);
            let (line, column) = line_column(&s, s.len());
            Err(ParseError::Syntax {
                location: Location {
                    path: "/".into(),
                    line,
                    column,
                },
                message: "input is not valid UTF-8".into(),
            })
        }
    }
}

struct Cx<'i> {
    input: &'i str,
}

/// An element and where it sits, for error messages. The path is built
/// only when an error needs it (walking the parents), so that parsing a large
/// document allocates no path strings.
#[derive(Clone, Copy)]
struct At<'a> {
    el: Element<'a>,
    parent: Option<&'a At<'a>>,
    /// 1-based position among same-named siblings, 0 for single elements.
    index: usize,
}

impl<'a> At<'a> {
    fn child(&'a self, el: Element<'a>, index: usize) -> At<'a> {
        At {
            el,
            parent: Some(self),
            index,
        }
    }

    fn path(&self) -> String {
        let mut parts = Vec::new();
        let mut cur = Some(self);
        while let Some(a) = cur {
            parts.push(if a.index > 0 {
                format!("{}[{}]", a.el.name(), a.index)
            } else {
                a.el.name().to_owned()
            });
            cur = a.parent;
        }
        parts.reverse();
        format!("/{}", parts.join("/"))
    }
}

impl Cx<'_> {
    fn loc(&self, at: At<'_>) -> Location {
        let (line, column) = line_column(self.input, at.el.offset());
        Location {
            path: at.path(),
            line,
            column,
        }
    }

    fn req<'a>(&self, at: At<'a>, name: &str) -> Result<&'a str, ParseError> {
        at.el
            .attr(name)
            .ok_or_else(|| ParseError::MissingAttribute {
                attribute: name.to_owned(),
                location: self.loc(at),
            })
    }

    fn invalid(&self, at: At<'_>, name: &str, value: &str, expected: &str) -> ParseError {
        ParseError::InvalidValue {
            attribute: name.to_owned(),
            value: truncate(value),
            expected: expected.to_owned(),
            location: self.loc(at),
        }
    }

    fn boolean(&self, at: At<'_>, name: &str, value: &str) -> Result<bool, ParseError> {
        // Pacemaker prints "true"/"false"; CIB-derived values may use its
        // other spellings (crm_is_true), which are accepted too.
        match value.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "y" | "1" => Ok(true),
            "false" | "no" | "off" | "n" | "0" => Ok(false),
            _ => Err(self.invalid(at, name, value, "true or false")),
        }
    }

    fn req_bool(&self, at: At<'_>, name: &str) -> Result<bool, ParseError> {
        let v = self.req(at, name)?;
        self.boolean(at, name, v)
    }

    fn opt_bool(&self, at: At<'_>, name: &str, default: bool) -> Result<bool, ParseError> {
        match at.el.attr(name) {
            Some(v) => self.boolean(at, name, v),
            None => Ok(default),
        }
    }

    fn opt_num<T: std::str::FromStr>(
        &self,
        at: At<'_>,
        name: &str,
    ) -> Result<Option<T>, ParseError> {
        match at.el.attr(name) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| self.invalid(at, name, v, "an integer")),
        }
    }

    fn opt_string(at: At<'_>, name: &str) -> Option<String> {
        at.el.attr(name).map(str::to_owned)
    }

    fn role(&self, at: At<'_>, name: &str, value: &str) -> Result<Role, ParseError> {
        Role::parse(value).ok_or_else(|| {
            self.invalid(
                at,
                name,
                value,
                "a role (Stopped, Started, Unpromoted, Promoted, Slave, Master, Starting, Stopping, Promoting, Demoting, Migrating, Unknown)",
            )
        })
    }

    fn document(&self, root: Element<'_>) -> Result<CrmMon, ParseError> {
        let root_at = At {
            el: root,
            parent: None,
            index: 0,
        };
        let at = root_at;
        let format = match root.name() {
            "pacemaker-result" => Format::PacemakerResult {
                api_version: self.req(at, "api-version")?.to_owned(),
            },
            "crm_mon" => Format::Legacy {
                version: Self::opt_string(at, "version"),
            },
            other => {
                return Err(ParseError::UnexpectedRoot {
                    name: other.to_owned(),
                    location: self.loc(at),
                });
            }
        };
        if let Some(d) = root.child("crm-mon-disconnected") {
            return Err(ParseError::Disconnected {
                description: d.attr("description").unwrap_or("no description").to_owned(),
            });
        }
        let mut doc = CrmMon {
            format,
            pacemakerd_state: None,
            summary: Summary {
                options: ClusterOptions::default(),
                ..Summary::default()
            },
            nodes: Vec::new(),
            resources: Vec::new(),
            node_attributes: BTreeMap::new(),
            node_history: Vec::new(),
            failures: Vec::new(),
            fence_history: None,
            tickets: Vec::new(),
            bans: Vec::new(),
            status: None,
        };
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for child in root.children() {
            let n = counts.entry(child.name()).or_insert(0);
            *n += 1;
            let at = root_at.child(child, 0);
            match child.name() {
                "pacemakerd" => doc.pacemakerd_state = Self::opt_string(at, "state"),
                "summary" => doc.summary = self.summary(at)?,
                "nodes" => {
                    for (i, el) in child.children_named("node").enumerate() {
                        doc.nodes.push(self.node(at.child(el, i + 1))?);
                    }
                }
                "resources" => doc.resources = self.resources(at, 0)?,
                "node_attributes" => self.node_attributes(at, &mut doc.node_attributes)?,
                "node_history" => {
                    for (i, el) in child.children_named("node").enumerate() {
                        doc.node_history
                            .push(self.node_history(at.child(el, i + 1))?);
                    }
                }
                "failures" => {
                    for (i, el) in child.children_named("failure").enumerate() {
                        doc.failures.push(self.failure(at.child(el, i + 1))?);
                    }
                }
                "fence_history" => doc.fence_history = Some(self.fence_history(at)?),
                "tickets" => {
                    for (i, el) in child.children_named("ticket").enumerate() {
                        doc.tickets.push(self.ticket(at.child(el, i + 1))?);
                    }
                }
                "bans" => {
                    for (i, el) in child.children_named("ban").enumerate() {
                        doc.bans.push(self.ban(at.child(el, i + 1))?);
                    }
                }
                "status" => {
                    let code =
                        self.opt_num(at, "code")?
                            .ok_or_else(|| ParseError::MissingAttribute {
                                attribute: "code".into(),
                                location: self.loc(at),
                            })?;
                    let errors = child
                        .child("errors")
                        .map(|e| {
                            e.children_named("error")
                                .map(|x| x.text().trim().to_owned())
                                .collect()
                        })
                        .unwrap_or_default();
                    doc.status = Some(ResultStatus {
                        code,
                        message: Self::opt_string(at, "message"),
                        errors,
                    });
                }
                _ => {}
            }
        }
        Ok(doc)
    }

    fn summary(&self, at: At<'_>) -> Result<Summary, ParseError> {
        let mut s = Summary::default();
        for child in at.el.children() {
            let c = at.child(child, 0);
            match child.name() {
                "stack" => s.stack = Self::opt_string(c, "type"),
                "current_dc" => {
                    let present = self.req_bool(c, "present")?;
                    if present {
                        s.dc = Some(Dc {
                            name: self.req(c, "name")?.to_owned(),
                            id: Self::opt_string(c, "id"),
                            version: Self::opt_string(c, "version"),
                        });
                        s.with_quorum = self.opt_bool(c, "with_quorum", false)?;
                    }
                }
                "last_update" => s.last_update = Self::opt_string(c, "time"),
                "nodes_configured" => s.nodes_configured = self.opt_num(c, "number")?,
                "resources_configured" => s.resources_configured = self.opt_num(c, "number")?,
                "cluster_options" => s.options = self.cluster_options(c)?,
                _ => {}
            }
        }
        Ok(s)
    }

    fn cluster_options(&self, at: At<'_>) -> Result<ClusterOptions, ParseError> {
        // 3.0.2 renamed stonith-* to fencing-*; read the new name first.
        let fencing_enabled = match at.el.attr("fencing-enabled") {
            Some(v) => self.boolean(at, "fencing-enabled", v)?,
            None => self.opt_bool(at, "stonith-enabled", true)?,
        };
        let fencing_timeout_ms = match self.opt_num(at, "fencing-timeout-ms")? {
            Some(v) => Some(v),
            None => self.opt_num(at, "stonith-timeout-ms")?,
        };
        Ok(ClusterOptions {
            fencing_enabled,
            maintenance_mode: self.opt_bool(at, "maintenance-mode", false)?,
            no_quorum_policy: Self::opt_string(at, "no-quorum-policy"),
            stop_all_resources: self.opt_bool(at, "stop-all-resources", false)?,
            fencing_timeout_ms,
            priority_fencing_delay_ms: self.opt_num(at, "priority-fencing-delay-ms")?,
        })
    }

    fn node(&self, at: At<'_>) -> Result<Node, ParseError> {
        let node_type = match at.el.attr("type") {
            None => NodeType::Member,
            Some(t) => match t {
                "member" => NodeType::Member,
                "remote" => NodeType::Remote,
                "ping" => NodeType::Ping,
                "unknown" => NodeType::Unknown,
                other => {
                    return Err(self.invalid(at, "type", other, "member, remote, ping or unknown"));
                }
            },
        };
        let resources_running = self.opt_num(at, "resources_running")?.unwrap_or(0);
        Ok(Node {
            name: self.req(at, "name")?.to_owned(),
            id: self.req(at, "id")?.to_owned(),
            online: self.req_bool(at, "online")?,
            standby: self.opt_bool(at, "standby", false)?,
            standby_onfail: self.opt_bool(at, "standby_onfail", false)?,
            maintenance: self.opt_bool(at, "maintenance", false)?,
            pending: self.opt_bool(at, "pending", false)?,
            unclean: self.opt_bool(at, "unclean", false)?,
            shutdown: self.opt_bool(at, "shutdown", false)?,
            expected_up: self.opt_bool(at, "expected_up", false)?,
            is_dc: self.opt_bool(at, "is_dc", false)?,
            resources_running,
            node_type,
            health: Self::opt_string(at, "health"),
            container_id: Self::opt_string(at, "container_id")
                .or_else(|| Self::opt_string(at, "id_as_resource")),
        })
    }

    fn resources(&self, at: At<'_>, depth: usize) -> Result<Vec<Resource>, ParseError> {
        let mut out = Vec::new();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for child in at.el.children() {
            let n = counts.entry(child.name()).or_insert(0);
            *n += 1;
            let c = at.child(child, *n);
            match child.name() {
                "resource" => out.push(Resource::Primitive(self.primitive(c, false)?)),
                "group" => out.push(Resource::Group(self.group(c, false)?)),
                "clone" => out.push(Resource::Clone(self.clone(c, depth)?)),
                "bundle" => out.push(Resource::Bundle(self.bundle(c)?)),
                _ => {}
            }
        }
        Ok(out)
    }

    fn primitive(&self, at: At<'_>, promotable: bool) -> Result<Primitive, ParseError> {
        let role_text = self.req(at, "role")?;
        let mut role = self.role(at, "role", role_text)?;
        // 2.0 prints a Started instance of a promotable clone as "Started";
        // 2.1 prints "Unpromoted". Normalise to the newer spelling.
        if promotable && role == Role::Started {
            role = Role::Unpromoted;
        }
        let target_role = match at.el.attr("target_role") {
            Some(v) => Some(self.role(at, "target_role", v)?),
            None => None,
        };
        let mut nodes = Vec::new();
        for (i, n) in at.el.children_named("node").enumerate() {
            nodes.push(self.req(at.child(n, i + 1), "name")?.to_owned());
        }
        let orphaned = match at.el.attr("removed") {
            Some(v) => self.boolean(at, "removed", v)?,
            None => self.opt_bool(at, "orphaned", false)?,
        };
        Ok(Primitive {
            id: self.req(at, "id")?.to_owned(),
            agent: self.req(at, "resource_agent")?.to_owned(),
            role,
            target_role,
            active: self.req_bool(at, "active")?,
            orphaned,
            blocked: self.opt_bool(at, "blocked", false)?,
            managed: self.opt_bool(at, "managed", true)?,
            failed: self.opt_bool(at, "failed", false)?,
            failure_ignored: self.opt_bool(at, "failure_ignored", false)?,
            maintenance: self.opt_bool(at, "maintenance", false)?,
            nodes_running_on: self
                .opt_num(at, "nodes_running_on")?
                .unwrap_or(u32::try_from(nodes.len()).unwrap_or(u32::MAX)),
            pending: Self::opt_string(at, "pending"),
            locked_to: Self::opt_string(at, "locked_to"),
            nodes,
        })
    }

    fn group(&self, at: At<'_>, promotable: bool) -> Result<Group, ParseError> {
        let mut members = Vec::new();
        for (i, el) in at.el.children_named("resource").enumerate() {
            members.push(self.primitive(at.child(el, i + 1), promotable)?);
        }
        Ok(Group {
            id: self.req(at, "id")?.to_owned(),
            managed: self.opt_bool(at, "managed", true)?,
            disabled: self.opt_bool(at, "disabled", false)?,
            maintenance: self.opt_bool(at, "maintenance", false)?,
            members,
        })
    }

    fn clone(&self, at: At<'_>, depth: usize) -> Result<Clone, ParseError> {
        let promotable = self.opt_bool(at, "multi_state", false)?;
        let mut children = Vec::new();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for child in at.el.children() {
            let n = counts.entry(child.name()).or_insert(0);
            *n += 1;
            let c = at.child(child, *n);
            match child.name() {
                "resource" => children.push(Resource::Primitive(self.primitive(c, promotable)?)),
                "group" => children.push(Resource::Group(self.group(c, promotable)?)),
                // Pacemaker does not nest clones, but the tree depth is
                // bounded here (depth < 8), so accepting it is safe.
                "clone" if depth < 8 => children.push(Resource::Clone(self.clone(c, depth + 1)?)),
                _ => {}
            }
        }
        let target_role = match at.el.attr("target_role") {
            Some(v) => Some(self.role(at, "target_role", v)?),
            None => None,
        };
        Ok(Clone {
            id: self.req(at, "id")?.to_owned(),
            promotable,
            unique: self.opt_bool(at, "unique", false)?,
            managed: self.opt_bool(at, "managed", true)?,
            disabled: self.opt_bool(at, "disabled", false)?,
            failed: self.opt_bool(at, "failed", false)?,
            maintenance: self.opt_bool(at, "maintenance", false)?,
            target_role,
            children,
        })
    }

    fn bundle(&self, at: At<'_>) -> Result<Bundle, ParseError> {
        let mut replicas = Vec::new();
        for (i, el) in at.el.children_named("replica").enumerate() {
            let r = at.child(el, i + 1);
            let mut primitives = Vec::new();
            for (j, el) in el.children_named("resource").enumerate() {
                primitives.push(self.primitive(r.child(el, j + 1), false)?);
            }
            replicas.push(Replica {
                id: self.req(r, "id")?.to_owned(),
                primitives,
            });
        }
        Ok(Bundle {
            id: self.req(at, "id")?.to_owned(),
            container_type: Self::opt_string(at, "type"),
            image: Self::opt_string(at, "image"),
            unique: self.opt_bool(at, "unique", false)?,
            managed: self.opt_bool(at, "managed", true)?,
            failed: self.opt_bool(at, "failed", false)?,
            maintenance: self.opt_bool(at, "maintenance", false)?,
            replicas,
        })
    }

    fn node_attributes(
        &self,
        at: At<'_>,
        out: &mut BTreeMap<String, BTreeMap<String, String>>,
    ) -> Result<(), ParseError> {
        for (i, el) in at.el.children_named("node").enumerate() {
            let n = at.child(el, i + 1);
            let name = self.req(n, "name")?.to_owned();
            let attrs = out.entry(name).or_default();
            for (j, el) in el.children_named("attribute").enumerate() {
                let a = n.child(el, j + 1);
                attrs.insert(
                    self.req(a, "name")?.to_owned(),
                    a.el.attr("value").unwrap_or_default().to_owned(),
                );
            }
        }
        Ok(())
    }

    fn node_history(&self, at: At<'_>) -> Result<NodeHistory, ParseError> {
        let mut resources = Vec::new();
        for (i, el) in at.el.children_named("resource_history").enumerate() {
            let r = at.child(el, i + 1);
            let mut operations = Vec::new();
            for (j, el) in el.children_named("operation_history").enumerate() {
                let o = r.child(el, j + 1);
                operations.push(Operation {
                    call: self.opt_num(o, "call")?,
                    task: self.req(o, "task")?.to_owned(),
                    interval: Self::opt_string(o, "interval"),
                    rc: self
                        .opt_num(o, "rc")?
                        .ok_or_else(|| ParseError::MissingAttribute {
                            attribute: "rc".into(),
                            location: self.loc(o),
                        })?,
                    rc_text: Self::opt_string(o, "rc_text"),
                    exit_reason: Self::opt_string(o, "exit-reason"),
                    last_rc_change: Self::opt_string(o, "last-rc-change"),
                });
            }
            let orphan = match r.el.attr("removed") {
                Some(v) => self.boolean(r, "removed", v)?,
                None => self.opt_bool(r, "orphan", false)?,
            };
            resources.push(ResourceHistory {
                id: self.req(r, "id")?.to_owned(),
                orphan,
                fail_count: Self::opt_string(r, "fail-count"),
                migration_threshold: Self::opt_string(r, "migration-threshold"),
                operations,
            });
        }
        Ok(NodeHistory {
            node: self.req(at, "name")?.to_owned(),
            resources,
        })
    }

    fn failure(&self, at: At<'_>) -> Result<Failure, ParseError> {
        let op_key = match at.el.attr("op_key").or_else(|| at.el.attr("id")) {
            Some(k) => k.to_owned(),
            None => {
                return Err(ParseError::MissingAttribute {
                    attribute: "op_key".into(),
                    location: self.loc(at),
                });
            }
        };
        Ok(Failure {
            op_key,
            node: self.req(at, "node")?.to_owned(),
            exit_status: Self::opt_string(at, "exitstatus"),
            exit_reason: Self::opt_string(at, "exitreason"),
            exit_code: self.opt_num(at, "exitcode")?,
            call: self.opt_num(at, "call")?,
            status: Self::opt_string(at, "status"),
            last_rc_change: Self::opt_string(at, "last-rc-change"),
            task: Self::opt_string(at, "task"),
            interval_ms: self.opt_num(at, "interval")?,
        })
    }

    fn fence_history(&self, at: At<'_>) -> Result<FenceHistory, ParseError> {
        let mut events = Vec::new();
        for (i, el) in at.el.children_named("fence_event").enumerate() {
            let e = at.child(el, i + 1);
            let status = match self.req(e, "status")? {
                "success" => FenceStatus::Success,
                "failed" => FenceStatus::Failed,
                "pending" => FenceStatus::Pending,
                other => {
                    return Err(self.invalid(e, "status", other, "success, failed or pending"));
                }
            };
            let completed = match e.el.attr("completed") {
                None => None,
                Some(v) => Some(parse_pacemaker_time(v, UtcOffset::UTC).ok_or_else(|| {
                    self.invalid(
                        e,
                        "completed",
                        v,
                        "YYYY-MM-DD HH:MM:SS[.uuuuuu] with an optional zone",
                    )
                })?),
            };
            events.push(FenceEvent {
                target: self.req(e, "target")?.to_owned(),
                action: self.req(e, "action")?.to_owned(),
                status,
                completed,
                delegate: Self::opt_string(e, "delegate"),
                origin: Self::opt_string(e, "origin"),
                client: Self::opt_string(e, "client"),
                exit_reason: Self::opt_string(e, "exit-reason"),
            });
        }
        Ok(FenceHistory {
            query_status: self.opt_num(at, "status")?,
            events,
        })
    }

    fn ticket(&self, at: At<'_>) -> Result<Ticket, ParseError> {
        let granted = match at.el.attr("status") {
            None => false,
            Some("granted") => true,
            Some("revoked") => false,
            Some(other) => return Err(self.invalid(at, "status", other, "granted or revoked")),
        };
        Ok(Ticket {
            id: self.req(at, "id")?.to_owned(),
            granted,
            standby: self.opt_bool(at, "standby", false)?,
            last_granted: Self::opt_string(at, "last-granted"),
        })
    }

    fn ban(&self, at: At<'_>) -> Result<Ban, ParseError> {
        let promoted_only = match at.el.attr("promoted-only") {
            Some(v) => self.boolean(at, "promoted-only", v)?,
            None => self.opt_bool(at, "master_only", false)?,
        };
        Ok(Ban {
            id: self.req(at, "id")?.to_owned(),
            resource: self.req(at, "resource")?.to_owned(),
            node: self.req(at, "node")?.to_owned(),
            weight: Self::opt_string(at, "weight").unwrap_or_default(),
            promoted_only,
        })
    }
}
