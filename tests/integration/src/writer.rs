//! Clients that write throughout a fault and the checks on what they were
//! told. One writer thread per node, inside that node's network namespace,
//! writing only to that node's etcd: if two clusters ever accepted writes at
//! the same time, both writers would get acknowledgements from diverging
//! histories, which the checks below find (the same revision acknowledged
//! twice, or an acknowledged write missing afterwards).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Result, bail, ensure};

use crate::gateway::{self, NetNs};

/// One acknowledged write.
#[derive(Debug, Clone)]
pub struct Ack {
    /// The node whose etcd acknowledged it.
    pub node: String,
    /// Key (unique per write).
    pub key: String,
    /// Value.
    pub value: String,
    /// The revision etcd answered with.
    pub revision: u64,
    /// etcd's cluster id in the answer.
    pub cluster_id: u64,
    /// When the put was sent.
    pub sent: Instant,
    /// When the answer arrived.
    pub at: Instant,
    /// The same, as wall-clock time (to compare with Pacemaker's logs).
    pub wall: SystemTime,
}

/// What one writer thread saw, besides its acks.
#[derive(Debug, Default, Clone)]
struct Counts {
    attempts: u64,
    failures: u64,
    last_error: Option<String>,
}

/// Writer threads, one per target; stopped (and joined) on drop.
pub struct Writer {
    prefix: String,
    stop: Arc<AtomicBool>,
    acks: Arc<Mutex<Vec<Ack>>>,
    counts: Arc<Mutex<HashMap<String, Counts>>>,
    threads: Vec<JoinHandle<()>>,
}

/// Pause after a failed attempt: a node that is down refuses connections at
/// once, and a tight loop would steal the CPU the recovery needs. This paces
/// the client; it synchronises nothing.
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// Pause between successful writes: a steady stream, not a load test.
const WRITE_PAUSE: Duration = Duration::from_millis(20);
/// Deadline of one put.
const PUT_TIMEOUT: Duration = Duration::from_millis(1500);

impl Writer {
    /// Starts one writer per `(node, netns, etcd client address)`; keys are
    /// `<prefix>/<node>/<seq>`.
    pub fn start(prefix: &str, targets: Vec<(String, NetNs, SocketAddr)>) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let acks = Arc::new(Mutex::new(Vec::new()));
        let counts = Arc::new(Mutex::new(HashMap::new()));
        let mut threads = Vec::new();
        for (node, ns, addr) in targets {
            let (stop, acks, counts) = (stop.clone(), acks.clone(), counts.clone());
            let prefix = prefix.to_string();
            threads.push(std::thread::spawn(move || {
                if let Err(e) = ns.enter() {
                    counts.lock().unwrap_or_else(|e| e.into_inner()).insert(
                        node.clone(),
                        Counts {
                            last_error: Some(format!("{e:#}")),
                            ..Default::default()
                        },
                    );
                    return;
                }
                let mut seq = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    seq += 1;
                    let key = format!("{prefix}/{node}/{seq:08}");
                    let value = format!("v{seq}-{node}");
                    let sent = Instant::now();
                    let r = gateway::put(addr, &key, &value, PUT_TIMEOUT);
                    let mut c = counts.lock().unwrap_or_else(|e| e.into_inner());
                    let c = c.entry(node.clone()).or_default();
                    c.attempts += 1;
                    match r {
                        Ok(v) => {
                            let (cluster, _, rev) = gateway::header(&v);
                            if let Some(revision) = rev {
                                acks.lock().unwrap_or_else(|e| e.into_inner()).push(Ack {
                                    node: node.clone(),
                                    key,
                                    value,
                                    revision,
                                    cluster_id: cluster.unwrap_or(0),
                                    sent,
                                    at: Instant::now(),
                                    wall: SystemTime::now(),
                                });
                                std::thread::sleep(WRITE_PAUSE);
                                continue;
                            }
                            c.failures += 1;
                            c.last_error = Some(format!("answer without a revision: {v}"));
                        }
                        Err(e) => {
                            c.failures += 1;
                            c.last_error = Some(format!("{e:#}"));
                        }
                    }
                    std::thread::sleep(RETRY_PAUSE);
                }
            }));
        }
        Ok(Self {
            prefix: prefix.to_string(),
            stop,
            acks,
            counts,
            threads,
        })
    }

    /// The key prefix of this writer.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Every ack so far, in arrival order.
    pub fn acks(&self) -> Vec<Ack> {
        self.acks.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The first ack from `node` of a write sent after `t` (a write sent
    /// before a fault and answered just after it says nothing about the
    /// recovery).
    pub fn first_ack_after(&self, node: Option<&str>, t: Instant) -> Option<Ack> {
        self.acks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|a| a.sent > t && node.is_none_or(|n| a.node == n))
            .cloned()
    }

    /// Waits until a write sent after `t` is acknowledged (by `node`, or by
    /// anyone).
    pub fn wait_ack_after(&self, node: Option<&str>, t: Instant, timeout: Duration) -> Result<Ack> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(a) = self.first_ack_after(node, t) {
                return Ok(a);
            }
            if Instant::now() > deadline {
                bail!(
                    "no write acknowledged by {} within {timeout:?}; writers: {}",
                    node.unwrap_or("any node"),
                    self.summary()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// "node1: 812 acks / 840 attempts (last error …)" per node.
    pub fn summary(&self) -> String {
        let acks = self.acks();
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let mut nodes: Vec<_> = counts.keys().cloned().collect();
        nodes.sort();
        nodes
            .iter()
            .map(|n| {
                let c = &counts[n];
                format!(
                    "{n}: {} acks / {} attempts{}",
                    acks.iter().filter(|a| &a.node == n).count(),
                    c.attempts,
                    c.last_error
                        .as_ref()
                        .map(|e| format!(" (last error: {e})"))
                        .unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Stops the threads and returns every ack.
    pub fn finish(mut self) -> Vec<Ack> {
        self.halt();
        self.acks()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.halt();
    }
}

/// No split brain: no revision was acknowledged for two different writes.
/// Two clusters accepting writes at the same time would both hand out the
/// revisions after their common history.
pub fn check_unique_revisions(acks: &[Ack]) -> Result<()> {
    let mut seen: HashMap<u64, &Ack> = HashMap::new();
    for a in acks {
        if let Some(b) = seen.insert(a.revision, a) {
            bail!(
                "split brain: revision {} acknowledged twice: {} by {} and {} by {}",
                a.revision,
                b.key,
                b.node,
                a.key,
                a.node
            );
        }
    }
    Ok(())
}

/// Real-time order (linearizability of the acknowledged writes): a write
/// acknowledged before another was sent must have the lower revision. A
/// forced cluster that dropped a tail of the log and handed its revisions
/// out again breaks this even when the revisions stay unique.
pub fn check_real_time_order(acks: &[Ack]) -> Result<()> {
    let mut by_ack: Vec<&Ack> = acks.iter().collect();
    by_ack.sort_by_key(|a| a.at);
    let mut by_send: Vec<&Ack> = acks.iter().collect();
    by_send.sort_by_key(|a| a.sent);
    // Sweep the writes in the order they were sent; `before` holds the
    // acknowledged write with the highest revision among those answered
    // before the current one was sent.
    let mut i = 0;
    let mut before: Option<&Ack> = None;
    for b in by_send {
        while i < by_ack.len() && by_ack[i].at < b.sent {
            if before.is_none_or(|x| by_ack[i].revision > x.revision) {
                before = Some(by_ack[i]);
            }
            i += 1;
        }
        if let Some(a) = before
            && a.revision >= b.revision
        {
            bail!(
                "real-time order broken: {} (revision {}, acknowledged by {}) was answered before {} was sent, which got revision {} from {}",
                a.key,
                a.revision,
                a.node,
                b.key,
                b.revision,
                b.node
            );
        }
    }
    Ok(())
}

/// No acknowledged write lost: every ack is in `kvs` (read back under the
/// writer's prefix) with its value and its revision.
/// The acks of `acks` whose write `kvs` (a read of their prefix) does not
/// hold as acknowledged (value and revision).
pub fn lost_acks<'a>(acks: &'a [Ack], kvs: &[gateway::Kv]) -> Vec<&'a Ack> {
    let by_key: HashMap<&str, &gateway::Kv> = kvs.iter().map(|kv| (kv.key.as_str(), kv)).collect();
    acks.iter()
        .filter(|a| {
            !by_key
                .get(a.key.as_str())
                .is_some_and(|kv| kv.value == a.value && kv.mod_revision == a.revision)
        })
        .collect()
}

pub fn check_all_present(acks: &[Ack], kvs: &[gateway::Kv]) -> Result<()> {
    let by_key: HashMap<&str, &gateway::Kv> = kvs.iter().map(|kv| (kv.key.as_str(), kv)).collect();
    let mut missing = Vec::new();
    for a in acks {
        match by_key.get(a.key.as_str()) {
            Some(kv) if kv.value == a.value && kv.mod_revision == a.revision => {}
            Some(kv) => missing.push(format!(
                "{} changed: acked {:?}@{} but read {:?}@{}",
                a.key, a.value, a.revision, kv.value, kv.mod_revision
            )),
            None => missing.push(format!(
                "{} (acked by {} at revision {})",
                a.key, a.node, a.revision
            )),
        }
    }
    ensure!(
        missing.is_empty(),
        "{} of {} acknowledged writes lost, e.g. {:?}",
        missing.len(),
        acks.len(),
        &missing[..missing.len().min(5)]
    );
    Ok(())
}

/// The longest time without an acknowledged write on `node` (on any node
/// for `None`) between `from` and `to` (the edges count as the ends of a
/// gap).
pub fn longest_gap(acks: &[Ack], node: Option<&str>, from: Instant, to: Instant) -> Duration {
    let mut times: Vec<Instant> = acks
        .iter()
        .filter(|a| node.is_none_or(|n| a.node == n) && a.at >= from && a.at <= to)
        .map(|a| a.at)
        .collect();
    times.sort();
    let mut last = from;
    let mut longest = Duration::ZERO;
    for t in times.into_iter().chain(std::iter::once(to)) {
        longest = longest.max(t.duration_since(last));
        last = t;
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(key: &str, revision: u64, sent: Instant, at: Instant) -> Ack {
        Ack {
            node: "n".into(),
            key: key.into(),
            value: "v".into(),
            revision,
            cluster_id: 1,
            sent,
            at,
            wall: SystemTime::now(),
        }
    }

    #[test]
    fn real_time_order_accepts_overlaps_and_refuses_a_later_write_with_a_lower_revision() {
        let t = Instant::now();
        let ms = |n| t + Duration::from_millis(n);
        // Overlapping writes may take revisions in either order.
        let ok = [
            ack("a", 5, ms(0), ms(10)),
            ack("b", 4, ms(5), ms(12)),
            ack("c", 6, ms(20), ms(30)),
        ];
        check_real_time_order(&ok).unwrap();
        // "d" was sent after "a" was answered, yet got a lower revision.
        let bad = [ack("a", 5, ms(0), ms(10)), ack("d", 3, ms(11), ms(15))];
        let e = check_real_time_order(&bad).unwrap_err().to_string();
        assert!(
            e.contains("real-time order broken") && e.contains("d"),
            "{e}"
        );
    }
}
