//! A background sampler of etcd's member list, for invariants that must hold
//! at every moment of a fault, not only at its end: always a voter while the
//! cluster answers, at most one extra voter during a membership change, one
//! cluster id, and whether a rejoining node was seen as a learner first.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::gateway::{self, NetNs};

/// What the samples showed.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// Member lists answered.
    pub samples: u64,
    /// The most voters in one answer.
    pub max_voters: usize,
    /// The fewest voters in one answer (`usize::MAX` before any answer).
    pub min_voters: usize,
    /// Cluster ids answered, per sampled node.
    pub cluster_ids: BTreeMap<String, BTreeSet<u64>>,
    /// Names (or ids, for a learner that has not started) seen as learners.
    pub learners: BTreeSet<String>,
    /// Member ids seen per member name.
    pub member_ids: BTreeMap<String, BTreeSet<u64>>,
}

/// Sampler threads, one per target node; stopped on drop.
pub struct MemberMonitor {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    threads: Vec<JoinHandle<()>>,
}

impl MemberMonitor {
    /// Samples the member list of each `(node, netns, client address)`
    /// every 100 ms.
    pub fn start(targets: Vec<(String, NetNs, SocketAddr)>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen {
            min_voters: usize::MAX,
            ..Default::default()
        }));
        let mut threads = Vec::new();
        for (node, ns, addr) in targets {
            let (stop, seen) = (stop.clone(), seen.clone());
            threads.push(std::thread::spawn(move || {
                if ns.enter().is_err() {
                    return;
                }
                while !stop.load(Ordering::Relaxed) {
                    // Only a list from a member that has a leader counts: a
                    // lone member without quorum still answers from its own
                    // (stale) view, which proves nothing.
                    if let Ok((cid, ms)) = gateway::member_list(addr, Duration::from_secs(1))
                        && gateway::range_prefix(addr, "/warden-test/probe", Duration::from_secs(1))
                            .is_ok()
                    {
                        let voters = ms.iter().filter(|m| !m.is_learner).count();
                        let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
                        s.samples += 1;
                        s.max_voters = s.max_voters.max(voters);
                        s.min_voters = s.min_voters.min(voters);
                        s.cluster_ids.entry(node.clone()).or_default().insert(cid);
                        for m in &ms {
                            let name = if m.name.is_empty() {
                                format!("{:x}", m.id)
                            } else {
                                m.name.clone()
                            };
                            if m.is_learner {
                                s.learners.insert(name.clone());
                            }
                            s.member_ids.entry(name).or_default().insert(m.id);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }));
        }
        Self {
            stop,
            seen,
            threads,
        }
    }

    /// What was seen so far.
    pub fn seen(&self) -> Seen {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stops sampling and returns what was seen.
    pub fn finish(mut self) -> Seen {
        self.halt();
        self.seen()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for MemberMonitor {
    fn drop(&mut self) {
        self.halt();
    }
}
