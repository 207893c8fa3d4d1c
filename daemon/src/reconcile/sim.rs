//! A simulated two-node cluster behind the reconciler's ports, for unit
//! tests that drive the real reconciler (gather → decide → execute) through
//! whole scenarios without root or a cluster, as the model checker drives
//! `decide`.
//!
//! Pacemaker is simulated at its interface: `crm_mon` answers XML rendered
//! from the world's nodes, etcd instances and fence history (parsed by the
//! same parser as the real tool's output), and transient attributes live in
//! a map. etcd is simulated as one cluster's member list, each member up or
//! down; quorum is a majority of voters up. The local etcd's supervision
//! starts and stops this node's member. The node's files are real files in a
//! temporary directory, read and written by the real [`LocalPaths`].

// Test code: a poisoned lock is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crm_xml::CrmMon;
use warden_failover::DataRecord;

use super::local::LocalPaths;
use super::ports::{EtcdOps, EtcdReads, OpsError, PeerDown, Ports, Probe, Supervisor};
use crate::config::Settings;
use crate::etcd::conf::StartMode;
use crate::etcd::raft_progress::{ProgressError, RaftProgress, Replication};
use crate::etcd::{EtcdError, Member, MemberStatus};
use crate::pacemaker::{CLAIM_ATTR, Pacemaker, PcmkError, RECORD_ATTR};
use crate::supervise::ProcState;

/// The two nodes.
pub(crate) const A: &str = "n1";
/// The other.
pub(crate) const B: &str = "n2";

const CONF: &str = r#"
node_name = "NODE"
topology = "two-node"

[[nodes]]
name = "n1"
peer_urls = ["http://127.0.0.1:12380"]
client_urls = ["http://127.0.0.1:12379"]

[[nodes]]
name = "n2"
peer_urls = ["http://127.0.0.1:22380"]
client_urls = ["http://127.0.0.1:22379"]
"#;

/// Settings of node `me` of the pair.
pub(crate) fn settings(me: &str) -> Settings {
    crate::config::from_texts(&[("/c.toml".into(), CONF.replace("NODE", me))]).unwrap()
}

/// The etcd resource on a node, as Pacemaker shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Res {
    /// Running there.
    Started,
    /// A start in flight.
    Starting,
    /// A stop in flight.
    Stopping,
    /// Not running, no history.
    Inactive,
}

/// A node as Pacemaker shows it.
#[derive(Debug, Clone)]
pub(crate) struct SimNode {
    /// Online in the membership.
    pub(crate) online: bool,
    /// Lost and not fenced yet.
    pub(crate) unclean: bool,
    /// Expected up.
    pub(crate) expected_up: bool,
    /// Shutting down.
    pub(crate) shutdown: bool,
    /// The etcd instance there.
    pub(crate) etcd: Res,
}

impl SimNode {
    fn up() -> Self {
        SimNode {
            online: true,
            unclean: false,
            expected_up: true,
            shutdown: false,
            etcd: Res::Started,
        }
    }
}

/// One etcd member.
#[derive(Debug, Clone)]
pub(crate) struct SimMember {
    /// Member id.
    pub(crate) id: u64,
    /// Its node.
    pub(crate) node: String,
    /// A learner.
    pub(crate) learner: bool,
    /// Its etcd runs and answers.
    pub(crate) up: bool,
    /// Caught up with the leader.
    pub(crate) in_sync: bool,
    /// The leader's raft progress shows it replicated up to the commit
    /// index (a learner fresh from a snapshot is, before it answers).
    pub(crate) replicated: bool,
}

/// Everything simulated.
#[derive(Debug)]
pub(crate) struct World {
    /// The node under test.
    pub(crate) me: String,
    /// Corosync quorum as Pacemaker shows it.
    pub(crate) quorate: bool,
    /// Pacemaker's nodes.
    pub(crate) nodes: BTreeMap<String, SimNode>,
    /// Fence history: target, success, completion (Unix seconds).
    pub(crate) fences: Vec<(String, bool, u64)>,
    /// Transient attributes by (node, name).
    pub(crate) attrs: BTreeMap<(String, String), String>,
    /// The cluster's id.
    pub(crate) cluster_id: u64,
    /// The member list.
    pub(crate) members: Vec<SimMember>,
    /// The leave lock's holder.
    pub(crate) leave_lock: Option<String>,
    /// Every change the reconciler made, in order.
    pub(crate) log: Vec<String>,
    /// How long `crm_mon` takes (a slow Pacemaker).
    pub(crate) crm_mon_delay: Duration,
    /// A removal takes effect but its answer never arrives (the member
    /// that applied its own removal stopped first).
    pub(crate) lose_remove_reply: bool,
    /// The nodes whose member was asked for its Status, in order.
    pub(crate) asked: Vec<String>,
    next_id: u64,
}

/// The simulated world, shared by the ports of the node under test.
#[derive(Debug, Clone)]
pub(crate) struct Sim {
    /// The world.
    pub(crate) world: Arc<Mutex<World>>,
    /// The node's files (real files).
    pub(crate) paths: LocalPaths,
    /// The node's settings.
    pub(crate) settings: Arc<Settings>,
}

/// A DataRecord as a peer's daemon publishes it.
pub(crate) fn record(
    boot: &str,
    has_data: bool,
    epoch: u64,
    cluster_id: Option<u64>,
) -> DataRecord {
    DataRecord {
        boot_id: boot.into(),
        has_data,
        formed: has_data,
        epoch,
        cluster_id,
        ..DataRecord::default()
    }
}

/// A time as crm_mon prints fence events (`YYYY-MM-DD HH:MM:SSZ`).
fn iso(t: u64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(i64::try_from(t).unwrap()).unwrap();
    crm_xml::timefmt::format_k8s(t).replacen('T', " ", 1)
}

impl Sim {
    /// Node `me` of a pair, both online, no etcd anywhere, nothing on disk.
    pub(crate) fn new(me: &str, dir: &std::path::Path) -> Self {
        let nodes = [A, B]
            .iter()
            .map(|n| {
                let mut s = SimNode::up();
                s.etcd = Res::Inactive;
                (n.to_string(), s)
            })
            .collect();
        Sim {
            world: Arc::new(Mutex::new(World {
                me: me.into(),
                quorate: true,
                nodes,
                fences: Vec::new(),
                attrs: BTreeMap::new(),
                cluster_id: 0,
                members: Vec::new(),
                leave_lock: None,
                log: Vec::new(),
                crm_mon_delay: Duration::ZERO,
                lose_remove_reply: false,
                asked: Vec::new(),
                next_id: 0x10,
            })),
            paths: LocalPaths {
                data_dir: dir.join("data"),
                state_file: dir.join("state/failover-state.json"),
                run_dir: dir.join("run"),
                archive_dir: dir.join("archives"),
            },
            settings: Arc::new(settings(me)),
        }
    }

    /// The ports of the node under test.
    pub(crate) fn ports(&self) -> Ports<'_, Sim, Sim, Sim> {
        Ports {
            pacemaker: self,
            etcd: self,
            supervisor: self,
            settings: &self.settings,
        }
    }

    /// Change the world.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        f(&mut self.world.lock().unwrap())
    }

    /// The changes made so far, and forget them.
    pub(crate) fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut self.world.lock().unwrap().log)
    }

    /// A healthy pair: cluster `cluster_id`, both voters up, this node's
    /// data on disk and its state file naming it, both records published
    /// at `epoch`; the in-sync marker of this boot when `in_sync`.
    pub(crate) fn healthy(&self, cluster_id: u64, epoch: u64, in_sync: bool) {
        let me = self.settings.node_name.clone();
        self.with(|w| {
            w.cluster_id = cluster_id;
            w.members = [A, B]
                .iter()
                .enumerate()
                .map(|(i, n)| SimMember {
                    id: 0x100 + i as u64,
                    node: n.to_string(),
                    learner: false,
                    up: true,
                    in_sync: true,
                    replicated: true,
                })
                .collect();
            for n in w.nodes.values_mut() {
                n.etcd = Res::Started;
            }
        });
        let my_id = self.member_of(&me).unwrap().id;
        self.write_data(cluster_id, my_id, epoch, &[A, B]);
        for n in [A, B] {
            self.publish(
                n,
                record(&format!("{n}-boot"), true, epoch, Some(cluster_id)),
            );
        }
        if in_sync {
            let boot = self.paths.boot_id().unwrap();
            self.paths.mark_in_sync(&boot).unwrap();
        }
    }

    /// This node's data on disk, and the state file describing it.
    pub(crate) fn write_data(&self, cluster_id: u64, member_id: u64, epoch: u64, voters: &[&str]) {
        std::fs::create_dir_all(self.paths.member_dir().join("snap")).unwrap();
        std::fs::write(self.paths.member_dir().join("snap/db"), b"db").unwrap();
        self.paths
            .update_state(|s| {
                s.formed = true;
                s.epoch = epoch;
                s.cluster_id = Some(cluster_id);
                s.member_id = Some(member_id);
                s.voters = voters.iter().map(|v| v.to_string()).collect();
            })
            .unwrap();
    }

    /// `node`'s record as its daemon publishes it.
    pub(crate) fn publish(&self, node: &str, r: DataRecord) {
        let v = serde_json::to_string(&r).unwrap();
        self.with(|w| w.attrs.insert((node.into(), RECORD_ATTR.into()), v));
    }

    /// `node`'s member, if listed.
    pub(crate) fn member_of(&self, node: &str) -> Option<SimMember> {
        self.with(|w| w.members.iter().find(|m| m.node == node).cloned())
    }

    /// `node` lost: offline and unclean, its member down.
    pub(crate) fn lose(&self, node: &str) {
        self.with(|w| {
            let n = w.nodes.get_mut(node).unwrap();
            n.online = false;
            n.unclean = true;
            n.etcd = Res::Inactive;
            for m in w.members.iter_mut().filter(|m| m.node == node) {
                m.up = false;
            }
        });
    }

    /// A fence of `node` that completed at `at` (Unix seconds), in the
    /// history only.
    pub(crate) fn fence(&self, node: &str, at: u64) {
        self.with(|w| w.fences.push((node.into(), true, at)));
    }

    /// Pacemaker fences `node` now: in the history, and the node is down
    /// cleanly from then on.
    pub(crate) fn fence_now(&self, node: &str) {
        self.fence(node, crate::clock::now_unix() + 1);
        self.with(|w| {
            let n = w.nodes.get_mut(node).unwrap();
            n.unclean = false;
            n.expected_up = false;
        });
    }

    /// This node's claim, as published.
    pub(crate) fn claim(&self, node: &str) -> Option<String> {
        self.with(|w| w.attrs.get(&(node.into(), CLAIM_ATTR.into())).cloned())
    }

    fn quorate(w: &World) -> bool {
        let voters: Vec<&SimMember> = w.members.iter().filter(|m| !m.learner).collect();
        let up = voters.iter().filter(|m| m.up).count();
        !voters.is_empty() && up * 2 > voters.len()
    }

    fn leader(w: &World) -> u64 {
        if !Self::quorate(w) {
            return 0;
        }
        let voters = || w.members.iter().filter(|m| !m.learner && m.up);
        voters()
            .find(|m| m.node == w.me)
            .or_else(|| voters().next())
            .map_or(0, |m| m.id)
    }

    fn status_of(&self, w: &World, node: &str) -> Result<MemberStatus, EtcdError> {
        let m = w
            .members
            .iter()
            .find(|m| m.node == node && m.up)
            .ok_or_else(|| EtcdError::Unavailable(format!("no etcd answers on {node}")))?;
        Ok(MemberStatus {
            member_id: m.id,
            leader: Self::leader(w),
            raft_term: 7,
            raft_index: if m.in_sync { 1200 } else { 10 },
            is_learner: m.learner,
            revision: 100,
            cluster_id: w.cluster_id,
            version: "3.5.0".into(),
            db_size: 1,
            db_size_in_use: 1,
            errors: vec![],
        })
    }

    fn member_list_of(&self, w: &World) -> Vec<Member> {
        w.members
            .iter()
            .map(|m| {
                let n = self.settings.nodes.iter().find(|n| n.name == m.node);
                Member {
                    id: m.id,
                    // A learner not started yet has no name.
                    name: if m.learner && !m.up {
                        String::new()
                    } else {
                        m.node.clone()
                    },
                    peer_urls: n.map(|n| n.peer_urls.clone()).unwrap_or_default(),
                    client_urls: n.map(|n| n.client_urls.clone()).unwrap_or_default(),
                    is_learner: m.learner,
                }
            })
            .collect()
    }

    fn crm_mon_xml(&self, w: &World) -> String {
        let mut x = String::from(
            "<pacemaker-result api-version=\"2.25\" request=\"crm_mon\">\n<summary>\n<stack type=\"corosync\"/>\n",
        );
        x.push_str(&format!(
            "<current_dc present=\"true\" version=\"2.1.5\" name=\"{A}\" id=\"1\" with_quorum=\"{}\" mixed_version=\"false\"/>\n",
            w.quorate
        ));
        x.push_str("<nodes_configured number=\"2\"/>\n</summary>\n<nodes>\n");
        for (i, (name, n)) in w.nodes.iter().enumerate() {
            x.push_str(&format!(
                "<node name=\"{name}\" id=\"{}\" online=\"{}\" standby=\"false\" standby_onfail=\"false\" maintenance=\"false\" pending=\"false\" unclean=\"{}\" health=\"green\" shutdown=\"{}\" expected_up=\"{}\" is_dc=\"false\" resources_running=\"0\" type=\"member\"/>\n",
                i + 1,
                n.online,
                n.unclean,
                n.shutdown,
                n.expected_up
            ));
        }
        x.push_str("</nodes>\n<resources>\n<clone id=\"etcd-clone\" multi_state=\"false\" unique=\"false\" maintenance=\"false\" managed=\"true\" disabled=\"false\" failed=\"false\" failure_ignored=\"false\">\n");
        for (i, (name, n)) in w.nodes.iter().enumerate() {
            let (active, pending) = match n.etcd {
                Res::Started => (true, None),
                Res::Starting => (false, Some("Starting")),
                Res::Stopping => (true, Some("Stopping")),
                Res::Inactive => continue,
            };
            let pending = pending.map_or(String::new(), |p| format!(" pending=\"{p}\""));
            x.push_str(&format!(
                "<resource id=\"etcd\" resource_agent=\"ocf:etcd-warden:etcd\" role=\"Started\" active=\"{active}\"{pending} orphaned=\"false\" blocked=\"false\" managed=\"true\" failed=\"false\" failure_ignored=\"false\" nodes_running_on=\"1\">\n<node name=\"{name}\" id=\"{}\" cached=\"true\"/>\n</resource>\n",
                i + 1
            ));
        }
        x.push_str("</clone>\n</resources>\n<fence_history>\n");
        for (target, ok, at) in &w.fences {
            x.push_str(&format!(
                "<fence_event action=\"reboot\" target=\"{target}\" client=\"pacemaker-controld\" origin=\"{A}\" status=\"{}\" delegate=\"{A}\" completed=\"{}\"/>\n",
                if *ok { "success" } else { "failed" },
                iso(*at)
            ));
        }
        x.push_str("</fence_history>\n<status code=\"0\" message=\"OK\"/>\n</pacemaker-result>\n");
        x
    }
}

#[async_trait::async_trait]
impl Pacemaker for Sim {
    async fn crm_mon(&self, deadline: Duration) -> Result<CrmMon, PcmkError> {
        let (delay, xml) = self.with(|w| (w.crm_mon_delay, self.crm_mon_xml(w)));
        // As the real tool: killed at the deadline.
        tokio::time::sleep(delay.min(deadline)).await;
        if delay > deadline {
            return Err(PcmkError::Tool(crate::tool::ToolError::Deadline {
                prog: "crm_mon".into(),
                secs: deadline.as_secs_f64(),
            }));
        }
        crm_xml::parse(&xml).map_err(|e| PcmkError::Parse {
            what: "the simulated crm_mon XML".into(),
            message: e.to_string(),
        })
    }

    async fn get_attr(
        &self,
        node: &str,
        name: &str,
        _d: Duration,
    ) -> Result<Option<String>, PcmkError> {
        Ok(self.with(|w| w.attrs.get(&(node.into(), name.into())).cloned()))
    }

    async fn set_attr(
        &self,
        node: &str,
        name: &str,
        v: &str,
        _d: Duration,
    ) -> Result<(), PcmkError> {
        self.with(|w| {
            w.log.push(format!("set {node} {name}"));
            w.attrs.insert((node.into(), name.into()), v.into());
        });
        Ok(())
    }

    async fn delete_attr(&self, node: &str, name: &str, _d: Duration) -> Result<(), PcmkError> {
        self.with(|w| {
            w.log.push(format!("delete {node} {name}"));
            w.attrs.remove(&(node.into(), name.into()));
        });
        Ok(())
    }

    async fn clear_failed_start(
        &self,
        resource: &str,
        node: &str,
        _d: Duration,
    ) -> Result<(), PcmkError> {
        self.with(|w| w.log.push(format!("cleanup {resource} start on {node}")));
        Ok(())
    }
}

impl EtcdReads for Sim {
    async fn status(&self, _d: Duration) -> Result<MemberStatus, EtcdError> {
        let me = self.settings.node_name.clone();
        self.with(|w| self.status_of(w, &me))
    }
    async fn linearizable_read(&self, _d: Duration) -> Result<i64, EtcdError> {
        self.with(|w| Self::quorate(w))
            .then_some(100)
            .ok_or_else(|| EtcdError::Timeout(Duration::from_secs(1)))
    }
    async fn member_list(&self, _d: Duration) -> Result<Vec<Member>, EtcdError> {
        Ok(self.with(|w| self.member_list_of(w)))
    }
    async fn leave_lock(&self, _d: Duration) -> Result<Option<String>, EtcdError> {
        Ok(self.with(|w| w.leave_lock.clone()))
    }
}

/// Another node's member, asked at its client URL.
#[derive(Debug)]
pub(crate) struct SimPeer {
    sim: Sim,
    node: String,
}

impl EtcdReads for SimPeer {
    async fn status(&self, _d: Duration) -> Result<MemberStatus, EtcdError> {
        self.sim.with(|w| self.sim.status_of(w, &self.node))
    }
    async fn linearizable_read(&self, d: Duration) -> Result<i64, EtcdError> {
        self.status(d).await?;
        self.sim.linearizable_read(d).await
    }
    async fn member_list(&self, d: Duration) -> Result<Vec<Member>, EtcdError> {
        self.status(d).await?;
        self.sim.member_list(d).await
    }
    async fn leave_lock(&self, d: Duration) -> Result<Option<String>, EtcdError> {
        self.status(d).await?;
        self.sim.leave_lock(d).await
    }
}

impl EtcdOps for Sim {
    type Peer = SimPeer;

    fn peer(&self, client_url: &str) -> SimPeer {
        let node = self
            .settings
            .nodes
            .iter()
            .find(|n| n.client_urls.iter().any(|u| u == client_url))
            .map(|n| n.name.clone())
            .unwrap_or_default();
        SimPeer {
            sim: self.clone(),
            node,
        }
    }

    // The leader's view of each member's log, as `replicated` says.
    async fn raft_progress(&self, _d: Duration) -> Result<RaftProgress, ProgressError> {
        let me = self.settings.node_name.clone();
        self.with(|w| {
            let leader = Self::leader(w);
            let id = w
                .members
                .iter()
                .find(|m| m.node == me && m.up)
                .map(|m| m.id)
                .ok_or_else(|| ProgressError::Answer {
                    url: "sim".into(),
                    why: format!("no etcd answers on {me}"),
                })?;
            let members = w
                .members
                .iter()
                .map(|m| {
                    let r = Replication {
                        matched: if m.replicated { 1200 } else { 10 },
                        replicating: m.replicated,
                    };
                    (m.id, r)
                })
                .collect();
            Ok(RaftProgress {
                id,
                is_leader: leader == id,
                commit: 1200,
                members,
            })
        })
    }

    async fn statuses(
        &self,
        members: &[Member],
        _d: Duration,
    ) -> Vec<(Member, Result<MemberStatus, EtcdError>)> {
        self.with(|w| {
            members
                .iter()
                .map(|m| {
                    let node = w
                        .members
                        .iter()
                        .find(|s| s.id == m.id)
                        .map(|s| s.node.clone())
                        .unwrap_or_default();
                    w.asked.push(node.clone());
                    (m.clone(), self.status_of(w, &node))
                })
                .collect()
        })
    }

    async fn acquire_leave_lock(&self, node: &str, _d: Duration) -> Result<String, EtcdError> {
        Ok(self.with(|w| {
            w.log.push(format!("lock {node}"));
            w.leave_lock.get_or_insert_with(|| node.into()).clone()
        }))
    }

    async fn release_leave_lock(&self, node: &str, _d: Duration) -> Result<(), EtcdError> {
        self.with(|w| {
            w.log.push(format!("unlock {node}"));
            if w.leave_lock.as_deref() == Some(node) {
                w.leave_lock = None;
            }
        });
        Ok(())
    }

    async fn add_learner(
        &self,
        peer_urls: Vec<String>,
        _d: Duration,
    ) -> Result<(Member, Vec<Member>), OpsError> {
        let node = self
            .settings
            .nodes
            .iter()
            .find(|n| n.peer_urls == peer_urls)
            .map(|n| n.name.clone())
            .unwrap_or_default();
        let list = self.with(|w| {
            w.log.push(format!("add learner {node}"));
            let id = w.next_id;
            w.next_id += 1;
            w.members.push(SimMember {
                id,
                node: node.clone(),
                learner: true,
                up: false,
                in_sync: false,
                replicated: false,
            });
            self.member_list_of(w)
        });
        let added = list.last().cloned().unwrap();
        Ok((added, list))
    }

    async fn promote(&self, id: u64, _d: Duration) -> Result<Vec<Member>, OpsError> {
        Ok(self.with(|w| {
            w.log.push(format!("promote {id:x}"));
            for m in w.members.iter_mut().filter(|m| m.id == id) {
                m.learner = false;
            }
            self.member_list_of(w)
        }))
    }

    async fn remove(&self, id: u64, d: Duration) -> Result<Vec<Member>, OpsError> {
        let (lost, list) = self.with(|w| {
            w.log.push(format!("remove {id:x}"));
            w.members.retain(|m| m.id != id);
            (w.lose_remove_reply, self.member_list_of(w))
        });
        if lost {
            // As a real call whose member stopped under it: no answer
            // until the deadline.
            tokio::time::sleep(d).await;
            return Err(OpsError::Etcd(EtcdError::Timeout(d)));
        }
        Ok(list)
    }

    async fn move_leader(&self, id: u64, _d: Duration) -> Result<(), OpsError> {
        // The simulated leader follows from who asks (see `leader`): the
        // move is only logged.
        self.with(|w| w.log.push(format!("move leader {id:x}")));
        Ok(())
    }
}

impl Supervisor for Sim {
    async fn state(&self) -> ProcState {
        let me = self.settings.node_name.clone();
        let up = self.with(|w| w.members.iter().any(|m| m.node == me && m.up));
        if up {
            ProcState::Running { pid: 4242 }
        } else {
            ProcState::Stopped
        }
    }

    async fn probe(&self, d: Duration, read: bool) -> Probe {
        let proc = Supervisor::state(self).await;
        let running = proc.pid().is_some();
        Probe {
            proc,
            status: if running {
                Some(EtcdReads::status(self, d).await)
            } else {
                None
            },
            read: if running && read {
                Some(EtcdReads::linearizable_read(self, d).await)
            } else {
                None
            },
        }
    }

    async fn start(&self, mode: StartMode, _d: Duration) -> Result<u32, OpsError> {
        let me = self.settings.node_name.clone();
        let what = match &mode {
            StartMode::Normal | StartMode::ClientsHeld { force: false, .. } => "existing",
            StartMode::Bootstrap { .. } => "new",
            StartMode::JoinExisting { .. } => "join",
            StartMode::ForceNewCluster | StartMode::ClientsHeld { force: true, .. } => "force",
        };
        // etcd creates its member directory when it starts on none.
        std::fs::create_dir_all(self.paths.member_dir()).unwrap();
        self.with(|w| {
            w.log.push(format!("start {what}"));
            if let StartMode::Bootstrap { .. } = mode
                && !w.members.iter().any(|m| m.node == me)
            {
                if w.cluster_id == 0 {
                    w.cluster_id = 0xc1;
                }
                let id = w.next_id;
                w.next_id += 1;
                w.members.push(SimMember {
                    id,
                    node: me.clone(),
                    learner: false,
                    up: true,
                    in_sync: true,
                    replicated: true,
                });
            }
            for m in w.members.iter_mut().filter(|m| m.node == me) {
                m.up = true;
            }
            if let Some(n) = w.nodes.get_mut(&me) {
                n.etcd = Res::Started;
            }
        });
        Ok(4242)
    }

    async fn stop(&self, _grace: Duration) -> Result<bool, OpsError> {
        let me = self.settings.node_name.clone();
        self.with(|w| {
            w.log.push("stop".into());
            for m in w.members.iter_mut().filter(|m| m.node == me) {
                m.up = false;
            }
        });
        Ok(true)
    }

    async fn start_moving_revision(&self, _at_risk: u64, d: Duration) -> Result<u32, OpsError> {
        self.start(StartMode::Normal, d).await
    }

    async fn restart_force_new_cluster(
        &self,
        peer_down: PeerDown,
        _at_risk: u64,
        _d: Duration,
    ) -> Result<u32, OpsError> {
        let me = self.settings.node_name.clone();
        self.with(|w| {
            w.log.push(format!("force (peer {} down)", peer_down.node));
            w.members.retain(|m| m.node == me);
            for m in &mut w.members {
                m.up = true;
            }
        });
        Ok(4242)
    }
}
