//! Watchers that follow a key prefix throughout a fault and check what
//! etcd's watch promises a client: every change under the prefix, in
//! revision order, each once, and none left out unless the watch was told
//! the history was compacted.
//!
//! One thread per node, inside that node's network namespace, runs
//! `etcdctl watch --prefix PREFIX --rev=1 -w json` against that node's etcd
//! only (the client [`crate::gateway`] uses; etcdctl prints one JSON watch
//! response per line). etcdctl keeps one watch stream across connection
//! losses: while the node is down it retries, and once the node's etcd
//! answers again it resumes after the last revision it delivered, which is
//! what a real client sees. A stream that etcdctl ends (compaction, an
//! error) is started again, from the compacted revision or from 1.
//!
//! Found while the watchers run (see [`WatchReport::check`]):
//! - a revision delivered with other events than another stream (of any
//!   node) delivered for it: two histories under one revision;
//! - a stream whose revisions go backwards, or that delivers a revision
//!   twice.
//!
//! Found against a final linearizable read (see
//! [`WatchReport::check_complete`]):
//! - an event a stream skipped: a key the read holds at a revision the
//!   stream passed without delivering it, and without a compaction error;
//! - an event a stream delivered that the final history does not hold.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

use crate::gateway::{self, Kv, NetNs};

/// Pause before a stream that etcdctl ended is started again: paces the
/// restarts while a node cannot be reached; synchronises nothing.
const RESTART_PAUSE: Duration = Duration::from_millis(200);

/// One event as a watch delivered it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Event {
    /// The key.
    pub key: String,
    /// The value put, `None` for a delete.
    pub value: Option<String>,
}

/// One watch stream (one etcdctl process) and what it delivered.
#[derive(Debug, Clone, Default)]
pub struct Stream {
    /// The node whose etcd it watched.
    pub node: String,
    /// The revision it was started from.
    pub from: u64,
    /// What it delivered, by revision (the events of one revision sorted).
    pub delivered: BTreeMap<u64, Vec<Event>>,
    /// The compacted revision, when etcd cancelled the stream for it.
    pub compacted: Option<u64>,
    /// How etcdctl ended, when it did before the watcher was stopped.
    pub ended: Option<String>,
}

impl Stream {
    /// The last revision delivered.
    pub fn last(&self) -> Option<u64> {
        self.delivered.keys().next_back().copied()
    }
}

/// What the watchers saw.
#[derive(Debug, Clone, Default)]
pub struct WatchReport {
    /// The watched prefix.
    pub prefix: String,
    /// Every stream, in the order started (per node).
    pub streams: Vec<Stream>,
    /// What broke the watch's promises while they ran.
    pub failures: Vec<String>,
}

#[derive(Default)]
struct Shared {
    report: WatchReport,
    /// The first delivery of each revision: its events, and by which node's
    /// stream.
    first: HashMap<u64, (Vec<Event>, String, usize)>,
}

/// Watcher threads, one per node; stopped (etcdctl killed by its PID, the
/// threads joined) on drop.
pub struct Watcher {
    stop: Arc<AtomicBool>,
    shared: Arc<Mutex<Shared>>,
    children: Arc<Mutex<HashMap<String, Child>>>,
    threads: Vec<JoinHandle<()>>,
    /// Ends the etcdctl processes when a signal ends this process (a
    /// campaign stopped with SIGTERM), which runs no `Drop`.
    _on_signal: warden_harness::OnSignal,
}

impl Watcher {
    /// Starts one watcher on `prefix` per node of `w`, etcdctl's messages
    /// in the cluster's root directory.
    pub fn on_every_node(w: &crate::twonode::WardenCluster, prefix: &str) -> Result<Self> {
        let targets = w
            .nodes()
            .into_iter()
            .map(|n| Ok((n.clone(), w.netns(&n)?, w.client_addr(&n)?)))
            .collect::<Result<Vec<_>>>()?;
        Watcher::start(prefix, targets, Some(w.c.root().to_path_buf()))
    }

    /// Starts one watcher per `(node, netns, etcd client address)` on
    /// `prefix`; etcdctl's own messages (reconnections, the reason a stream
    /// ended) go to `<log_dir>/watch-<node>.stderr` when `log_dir` is given.
    pub fn start(
        prefix: &str,
        targets: Vec<(String, NetNs, SocketAddr)>,
        log_dir: Option<PathBuf>,
    ) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Mutex::new(Shared {
            report: WatchReport {
                prefix: prefix.to_string(),
                ..Default::default()
            },
            ..Default::default()
        }));
        let children = Arc::new(Mutex::new(HashMap::new()));
        let mut threads = Vec::new();
        for (node, ns, addr) in targets {
            let ctx = StreamCtx {
                node,
                addr,
                prefix: prefix.to_string(),
                log_dir: log_dir.clone(),
                stop: stop.clone(),
                shared: shared.clone(),
                children: children.clone(),
            };
            threads.push(std::thread::spawn(move || {
                if let Err(e) = ns.enter() {
                    ctx.fail(format!("{}: cannot enter its namespace: {e:#}", ctx.node));
                    return;
                }
                ctx.run();
            }));
        }
        let ours = children.clone();
        let _on_signal = warden_harness::OnSignal::new(move || {
            for child in lock(&ours).values_mut() {
                let _ = child.kill();
            }
        });
        Ok(Self {
            stop,
            shared,
            children,
            threads,
            _on_signal,
        })
    }

    /// What was seen so far.
    pub fn report(&self) -> WatchReport {
        lock(&self.shared).report.clone()
    }

    /// The last revision each node's newest stream delivered (`None` for a
    /// node whose stream delivered nothing yet).
    pub fn last_delivered(&self) -> BTreeMap<String, Option<u64>> {
        let s = lock(&self.shared);
        let mut out = BTreeMap::new();
        for st in &s.report.streams {
            out.insert(st.node.clone(), st.last());
        }
        out
    }

    /// Waits until every node's newest stream has delivered `revision` or
    /// a later one (a watch that resumed after its node came back has then
    /// caught up with the history read at `revision`).
    pub fn wait_delivered(&self, nodes: &[String], revision: u64, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = self.last_delivered();
            let behind: Vec<String> = nodes
                .iter()
                .filter(|n| last.get(*n).copied().flatten().is_none_or(|r| r < revision))
                .map(|n| format!("{n} at {:?}", last.get(n).copied().flatten()))
                .collect();
            if behind.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the watches did not deliver revision {revision} within {timeout:?}: {}",
                    behind.join(", ")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Reads `prefix` on node1, waits until every node's watch delivered
    /// its newest revision, stops the watchers, and checks what they
    /// delivered against that read: one history, no revision twice,
    /// nothing skipped.
    pub fn finish_checked(
        self,
        w: &crate::twonode::WardenCluster,
        prefix: &str,
        timeout: Duration,
    ) -> Result<WatchReport> {
        let kvs = w.read("node1", prefix)?;
        let top = kvs.iter().map(|kv| kv.mod_revision).max().unwrap_or(0);
        self.wait_delivered(&w.nodes(), top, timeout)?;
        let report = self.finish();
        report.check()?;
        report.check_complete(&kvs)?;
        Ok(report)
    }

    /// Stops the watchers and returns what they saw.
    pub fn finish(mut self) -> WatchReport {
        self.halt();
        self.report()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for child in lock(&self.children).values_mut() {
            // Our own child, by its PID; it may have ended already.
            let _ = child.kill();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.halt();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One node's watcher thread.
struct StreamCtx {
    node: String,
    addr: SocketAddr,
    prefix: String,
    /// Where etcdctl's stderr goes (`watch-<node>.stderr` there).
    log_dir: Option<PathBuf>,
    stop: Arc<AtomicBool>,
    shared: Arc<Mutex<Shared>>,
    children: Arc<Mutex<HashMap<String, Child>>>,
}

impl StreamCtx {
    fn fail(&self, what: String) {
        lock(&self.shared).report.failures.push(what);
    }

    fn run(&self) {
        let mut from = 1;
        while !self.stop.load(Ordering::Relaxed) {
            match self.stream(from) {
                Ok(Some(compacted)) => from = compacted,
                Ok(None) => from = 1,
                Err(e) => {
                    if !self.stop.load(Ordering::Relaxed) {
                        self.fail(format!("{}: watch stream: {e:#}", self.node));
                    }
                    from = 1;
                }
            }
            std::thread::sleep(RESTART_PAUSE);
        }
    }

    fn stderr(&self) -> Stdio {
        let Some(dir) = &self.log_dir else {
            return Stdio::null();
        };
        let path = dir.join(format!("watch-{}.stderr", self.node));
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(Stdio::from)
            .unwrap_or_else(|_| Stdio::null())
    }

    /// Runs one stream from `from` until etcdctl ends; returns the compacted
    /// revision when etcd cancelled the stream for a compaction.
    fn stream(&self, from: u64) -> Result<Option<u64>> {
        let mut child = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(crate::gateway::endpoint_args(self.addr))
            .args(["-w", "json", "watch", "--prefix"])
            .arg(format!("--rev={from}"))
            .arg(&self.prefix)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(self.stderr())
            .spawn()
            .context("running etcdctl watch")?;
        let stdout = child.stdout.take().context("etcdctl without stdout")?;
        let idx = {
            let mut s = lock(&self.shared);
            s.report.streams.push(Stream {
                node: self.node.clone(),
                from,
                ..Default::default()
            });
            s.report.streams.len() - 1
        };
        lock(&self.children).insert(self.node.clone(), child);
        // Stopped between the check in `run` and the insert: halt() may
        // have missed this child.
        if self.stop.load(Ordering::Relaxed)
            && let Some(c) = lock(&self.children).get_mut(&self.node)
        {
            let _ = c.kill();
        }
        let mut compacted = None;
        let mut last: Option<u64> = None;
        for line in BufReader::new(stdout).lines() {
            let line = line.context("reading etcdctl's output")?;
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(line.trim())
                .with_context(|| format!("etcdctl watch printed no JSON: {line:?}"))?;
            if v.get("Canceled").and_then(Value::as_bool) == Some(true) {
                compacted = v
                    .get("CompactRevision")
                    .and_then(gateway::num)
                    .filter(|r| *r > 0);
                lock(&self.shared).report.streams[idx].compacted = compacted;
                continue;
            }
            let mut by_rev: BTreeMap<u64, Vec<Event>> = BTreeMap::new();
            for e in v
                .get("Events")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let kv = e.get("kv").context("watch event without kv")?;
                let rev = kv
                    .get("mod_revision")
                    .and_then(gateway::num)
                    .context("watch event without mod_revision")?;
                let key = gateway::unb64(kv.get("key").and_then(Value::as_str).unwrap_or(""))?;
                // PUT is type 0, left out of the JSON; DELETE is 1.
                let delete = e
                    .get("type")
                    .is_some_and(|t| t.as_u64() == Some(1) || t.as_str() == Some("DELETE"));
                let value = if delete {
                    None
                } else {
                    Some(gateway::unb64(
                        kv.get("value").and_then(Value::as_str).unwrap_or(""),
                    )?)
                };
                by_rev.entry(rev).or_default().push(Event { key, value });
            }
            for (rev, mut events) in by_rev {
                events.sort();
                self.record(idx, &mut last, rev, events);
            }
        }
        let status = lock(&self.children)
            .remove(&self.node)
            .map(|mut c| c.wait());
        if !self.stop.load(Ordering::Relaxed) {
            let how = match status {
                Some(Ok(s)) => format!("etcdctl ended: {s}"),
                Some(Err(e)) => format!("etcdctl ended, status unknown: {e}"),
                None => "etcdctl ended".to_string(),
            };
            lock(&self.shared).report.streams[idx].ended = Some(how.clone());
            if compacted.is_none() {
                // Not a failure of etcd's promises: the stream ends, a new
                // one starts from 1 and is checked as a stream of its own.
                return Ok(None);
            }
        }
        Ok(compacted)
    }

    /// Records the events of `rev` in stream `idx` and checks them against
    /// the stream's order and every other stream's delivery of `rev`.
    fn record(&self, idx: usize, last: &mut Option<u64>, rev: u64, events: Vec<Event>) {
        let mut s = lock(&self.shared);
        if let Some(l) = *last {
            if rev < l {
                s.report.failures.push(format!(
                    "{}: stream {idx} went backwards: revision {rev} ({events:?}) after {l}",
                    self.node
                ));
            } else if rev == l {
                s.report.failures.push(format!(
                    "{}: stream {idx} delivered revision {rev} twice ({events:?})",
                    self.node
                ));
            }
        }
        *last = Some(last.map_or(rev, |l| l.max(rev)));
        match s.first.get(&rev) {
            Some((seen, node, other)) if *seen != events => {
                let msg = format!(
                    "revision {rev} delivered twice with different events: {seen:?} by {node}'s stream {other}, {events:?} by {}'s stream {idx}",
                    self.node
                );
                s.report.failures.push(msg);
            }
            Some(_) => {}
            None => {
                s.first
                    .insert(rev, (events.clone(), self.node.clone(), idx));
            }
        }
        s.report.streams[idx].delivered.insert(rev, events);
    }
}

impl WatchReport {
    /// Events delivered, all streams together.
    pub fn events(&self) -> usize {
        self.streams
            .iter()
            .flat_map(|s| s.delivered.values())
            .map(Vec::len)
            .sum()
    }

    /// "node1: 3 streams, 812 events up to revision 905; …".
    pub fn summary(&self) -> String {
        let mut nodes: Vec<&str> = self.streams.iter().map(|s| s.node.as_str()).collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
            .iter()
            .map(|n| {
                let mine: Vec<&Stream> = self.streams.iter().filter(|s| s.node == *n).collect();
                let events: usize = mine
                    .iter()
                    .flat_map(|s| s.delivered.values())
                    .map(Vec::len)
                    .sum();
                let last = mine.iter().filter_map(|s| s.last()).max();
                format!(
                    "{n}: {} streams, {events} events up to revision {}",
                    mine.len(),
                    last.map_or("-".into(), |r| r.to_string())
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The failures found while the watchers ran: a revision delivered with
    /// different events, a stream that went backwards or repeated itself.
    pub fn check(&self) -> Result<()> {
        ensure!(
            self.failures.is_empty(),
            "{} watch failures, e.g. {:?}",
            self.failures.len(),
            &self.failures[..self.failures.len().min(5)]
        );
        Ok(())
    }

    /// Checks every stream against `kvs`, a linearizable read of the prefix
    /// after the fault (keys that were never deleted: the writer's): every
    /// key the read holds at a revision a stream passed was delivered by
    /// it with that value, unless the stream began after that revision or
    /// etcd cancelled it for a compaction; and no stream delivered a put
    /// the final history does not hold.
    pub fn check_complete(&self, kvs: &[Kv]) -> Result<()> {
        let by_key: HashMap<&str, &Kv> = kvs.iter().map(|kv| (kv.key.as_str(), kv)).collect();
        let mut problems = Vec::new();
        for (i, s) in self.streams.iter().enumerate() {
            let Some(last) = s.last() else { continue };
            let from = s.compacted.map_or(s.from, |c| c.max(s.from));
            for kv in kvs {
                let r = kv.mod_revision;
                if r < from || r > last {
                    continue;
                }
                let got = s.delivered.get(&r);
                let hit = got.is_some_and(|evs| {
                    evs.iter()
                        .any(|e| e.key == kv.key && e.value.as_deref() == Some(kv.value.as_str()))
                });
                if !hit {
                    problems.push(format!(
                        "{}'s stream {i} skipped {} = {:?} at revision {r} (it delivered up to {last}{}; at {r} it delivered {got:?})",
                        s.node,
                        kv.key,
                        kv.value,
                        s.compacted
                            .map_or(String::new(), |c| format!(", compacted at {c}"))
                    ));
                }
            }
            for (r, evs) in &s.delivered {
                for e in evs {
                    let Some(v) = &e.value else { continue };
                    match by_key.get(e.key.as_str()) {
                        Some(kv) if kv.mod_revision > *r => {}
                        Some(kv) if kv.mod_revision == *r && &kv.value == v => {}
                        found => problems.push(format!(
                            "{}'s stream {i} delivered {} = {v:?} at revision {r}, which the final history does not hold (it holds {})",
                            s.node,
                            e.key,
                            found.map_or("no such key".into(), |kv| format!(
                                "{:?} at revision {}",
                                kv.value, kv.mod_revision
                            ))
                        )),
                    }
                }
            }
        }
        ensure!(
            problems.is_empty(),
            "{} watch events skipped or not in the final history, e.g. {:?}",
            problems.len(),
            &problems[..problems.len().min(5)]
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Watches of a real one-member etcd on 127.0.0.1 (in this process's
    /// own network namespace).
    fn watcher_of(e: &warden_harness::EtcdCluster, prefix: &str) -> (Watcher, SocketAddr) {
        let url = e.client_url(0);
        let addr: SocketAddr = url.trim_start_matches("http://").parse().unwrap();
        let ns = NetNs::of_pid(i32::try_from(std::process::id()).unwrap()).unwrap();
        let w = Watcher::start(prefix, vec![("n1".into(), ns, addr)], None).unwrap();
        (w, addr)
    }

    #[test]
    fn a_watch_from_revision_1_delivers_every_put_once_and_resumes_after_a_compaction() {
        let e = warden_harness::EtcdCluster::start(1).unwrap();
        let t = Duration::from_secs(3);
        let (w, addr) = watcher_of(&e, "/w/");
        let mut last = 0;
        for i in 0..5 {
            let v = gateway::put(addr, &format!("/w/{i}"), &format!("v{i}"), t).unwrap();
            last = gateway::header(&v).2.unwrap();
            gateway::put(addr, "/elsewhere", "x", t).unwrap();
        }
        w.wait_delivered(&["n1".into()], last, t).unwrap();
        // A compaction the running stream does not notice.
        e.etcdctl(&["compact", &last.to_string()])
            .unwrap()
            .ok()
            .unwrap();
        let v = gateway::put(addr, "/w/late", "late", t).unwrap();
        let late = gateway::header(&v).2.unwrap();
        w.wait_delivered(&["n1".into()], late, t).unwrap();
        let report = w.finish();
        report.check().unwrap();
        let kvs = gateway::range_prefix(addr, "/w/", t).unwrap();
        assert_eq!(kvs.len(), 6);
        report.check_complete(&kvs).unwrap();
        assert_eq!(report.events(), 6, "{report:?}");
        assert_eq!(report.streams.len(), 1, "{report:?}");

        // A watch from 1 now is told of the compaction and starts again
        // from the compacted revision.
        let (w, _) = watcher_of(&e, "/w/");
        w.wait_delivered(&["n1".into()], late, t).unwrap();
        let report = w.finish();
        report.check().unwrap();
        report.check_complete(&kvs).unwrap();
        assert_eq!(report.streams[0].compacted, Some(last), "{report:?}");
        assert_eq!(report.streams[1].from, last, "{report:?}");
        assert_eq!(report.events(), 2, "{report:?}");
    }

    #[test]
    fn two_histories_under_one_revision_a_stream_going_back_and_a_skip_are_failures() {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let ctx = |node: &str| StreamCtx {
            node: node.into(),
            addr: "127.0.0.1:1".parse().unwrap(),
            prefix: "/p".into(),
            log_dir: None,
            stop: Arc::new(AtomicBool::new(false)),
            shared: shared.clone(),
            children: Arc::new(Mutex::new(HashMap::new())),
        };
        let ev = |k: &str, v: &str| {
            vec![Event {
                key: k.into(),
                value: Some(v.into()),
            }]
        };
        let (a, b) = (ctx("a"), ctx("b"));
        for c in [&a, &b] {
            lock(&shared).report.streams.push(Stream {
                node: c.node.clone(),
                from: 1,
                ..Default::default()
            });
        }
        let (mut la, mut lb) = (None, None);
        a.record(0, &mut la, 5, ev("/p/x", "1"));
        a.record(0, &mut la, 9, ev("/p/y", "2"));
        b.record(1, &mut lb, 5, ev("/p/x", "1"));
        b.record(1, &mut lb, 9, ev("/p/z", "3"));
        b.record(1, &mut lb, 7, ev("/p/w", "4"));
        let report = lock(&shared).report.clone();
        let failures = report.failures.join("\n");
        assert!(
            failures.contains("revision 9 delivered twice with different events"),
            "{failures}"
        );
        assert!(failures.contains("went backwards"), "{failures}");
        assert!(report.check().is_err());
        // The final history holds /p/y at 9 and /p/v at 6, which neither
        // stream delivered although both passed revision 6.
        let kvs = [
            Kv {
                key: "/p/x".into(),
                value: "1".into(),
                mod_revision: 5,
            },
            Kv {
                key: "/p/v".into(),
                value: "6".into(),
                mod_revision: 6,
            },
            Kv {
                key: "/p/y".into(),
                value: "2".into(),
                mod_revision: 9,
            },
        ];
        let e = format!("{:#}", report.check_complete(&kvs).unwrap_err());
        assert!(e.contains("a's stream 0 skipped /p/v"), "{e}");
        assert!(e.contains("b's stream 1 skipped /p/v"), "{e}");
    }
}
