//! etcd's client API as `etcdctl -w json` answers it (put, prefix get,
//! member list), run from a thread that entered a node's network namespace:
//! the nodes' addresses exist only inside the namespaces the harness
//! created, and a child process inherits its thread's namespace.

use std::collections::HashMap;
use std::fs::File;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use nix::sched::{CloneFlags, setns};
use serde_json::Value;
use warden_harness::field_tls::HostTls;

/// A handle on a node's network namespace (the open `/proc/PID/ns/net` of
/// its holder): it stays valid while the node is crashed or fenced, since
/// the holder survives both.
#[derive(Debug)]
pub struct NetNs {
    file: File,
}

impl NetNs {
    /// The network namespace of process `pid` (a node's holder).
    pub fn of_pid(pid: i32) -> Result<Self> {
        let path = format!("/proc/{pid}/ns/net");
        let file = File::open(&path).with_context(|| format!("opening {path}"))?;
        Ok(Self { file })
    }

    /// Moves the calling thread into the namespace. Only ever called on a
    /// thread of our own: a namespace is per thread.
    pub fn enter(&self) -> Result<()> {
        setns(&self.file, CloneFlags::CLONE_NEWNET).context("setns(CLONE_NEWNET)")
    }

    /// Runs `f` on a fresh thread inside the namespace and returns its result.
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let file = self.file.try_clone().context("dup of the netns fd")?;
        std::thread::spawn(move || {
            NetNs { file }.enter()?;
            f()
        })
        .join()
        .map_err(|_| anyhow::anyhow!("gateway thread panicked"))?
    }
}

/// The client addresses that serve TLS, with the files to reach them.
static TLS: Mutex<Option<HashMap<SocketAddr, HostTls>>> = Mutex::new(None);

/// From now on, reach `addr` over https with `tls` (every etcdctl this
/// module and the watchers run).
pub fn use_tls(addr: SocketAddr, tls: HostTls) {
    TLS.lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(addr, tls);
}

/// etcdctl's endpoint and TLS flags for `addr`: `http://` unless
/// [`use_tls`] named it.
pub fn endpoint_args(addr: SocketAddr) -> Vec<String> {
    let tls = TLS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&addr).cloned());
    match tls {
        None => vec![format!("--endpoints=http://{addr}")],
        Some(t) => vec![
            format!("--endpoints=https://{addr}"),
            format!("--cacert={}", t.ca.display()),
            format!("--cert={}", t.cert.display()),
            format!("--key={}", t.key.display()),
        ],
    }
}

/// base64 of `s`, as the gateway wants keys and values.
pub fn b64(s: &str) -> String {
    B64.encode(s.as_bytes())
}

/// Decodes a base64 field of a gateway answer.
pub fn unb64(s: &str) -> Result<String> {
    let bytes = B64.decode(s).with_context(|| format!("bad base64 {s:?}"))?;
    String::from_utf8(bytes).context("value is not UTF-8")
}

/// A u64/i64 the gateway prints as a decimal string (or a number).
pub fn num(v: &Value) -> Option<u64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

/// Runs `etcdctl -w json ARGS` against `addr` and parses its answer. It
/// runs as a child of the calling thread, so inside the namespace that
/// thread entered (see [`NetNs::run`]). etcdctl rather than etcd's JSON
/// gateway: etcd started from a configuration file, as the daemon starts
/// it, has the gateway off.
pub fn etcdctl(addr: SocketAddr, args: &[&str], timeout: Duration) -> Result<Value> {
    let ms = timeout.as_millis().max(1);
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(endpoint_args(addr))
        .arg(format!("--dial-timeout={ms}ms"))
        .arg(format!("--command-timeout={ms}ms"))
        .args(["-w", "json"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running etcdctl")?;
    ensure!(
        out.status.success(),
        "etcdctl {} at {addr}: {}",
        args.first().copied().unwrap_or(""),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(text.trim())
        .with_context(|| format!("etcdctl at {addr}: not JSON: {text:?}"))?;
    if let Some(e) = v.get("error") {
        bail!("etcdctl at {addr}: {e}");
    }
    Ok(v)
}

/// The header of a gateway answer: (cluster id, member id, revision).
pub fn header(v: &Value) -> (Option<u64>, Option<u64>, Option<u64>) {
    let h = v.get("header");
    let f = |k: &str| h.and_then(|h| h.get(k)).and_then(num);
    (f("cluster_id"), f("member_id"), f("revision"))
}

/// A put; returns the answer (its header carries the revision).
pub fn put(addr: SocketAddr, key: &str, value: &str, timeout: Duration) -> Result<Value> {
    etcdctl(addr, &["put", key, value], timeout)
}

/// One key-value pair of a range answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kv {
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
    /// The revision of its last change.
    pub mod_revision: u64,
}

/// Every key under `prefix`, read linearizably (a read that needs quorum);
/// etcdctl prints keys and values base64 in JSON.
pub fn range_prefix(addr: SocketAddr, prefix: &str, timeout: Duration) -> Result<Vec<Kv>> {
    let v = etcdctl(addr, &["get", "--prefix", prefix], timeout)?;
    let mut out = Vec::new();
    for kv in v.get("kvs").and_then(Value::as_array).into_iter().flatten() {
        let f = |k: &str| kv.get(k).and_then(Value::as_str).unwrap_or("");
        out.push(Kv {
            key: unb64(f("key"))?,
            value: unb64(f("value"))?,
            mod_revision: kv.get("mod_revision").and_then(num).unwrap_or(0),
        });
    }
    Ok(out)
}

/// One etcd member as the member list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Member id.
    pub id: u64,
    /// Member name (empty until a learner started).
    pub name: String,
    /// Whether it is a learner.
    pub is_learner: bool,
    /// Its peer URLs.
    pub peer_urls: Vec<String>,
    /// Its client URLs (none until the member has run: a member publishes
    /// them on its first start).
    pub client_urls: Vec<String>,
}

/// The member list and the cluster id as `addr` answers them.
pub fn member_list(addr: SocketAddr, timeout: Duration) -> Result<(u64, Vec<Member>)> {
    let v = etcdctl(addr, &["member", "list"], timeout)?;
    let (cluster, _, _) = header(&v);
    let mut out = Vec::new();
    for m in v
        .get("members")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.push(Member {
            id: m.get("ID").and_then(num).unwrap_or(0),
            name: m
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            is_learner: m.get("isLearner").and_then(Value::as_bool).unwrap_or(false),
            peer_urls: urls(m, "peerURLs"),
            client_urls: urls(m, "clientURLs"),
        });
    }
    Ok((cluster.unwrap_or(0), out))
}

fn urls(member: &Value, field: &str) -> Vec<String> {
    member
        .get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|u| u.as_str().map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gateway calls against a real one-member etcd on 127.0.0.1.
    #[test]
    fn put_range_and_member_list_on_real_etcd() {
        let e = warden_harness::EtcdCluster::start(1).unwrap();
        let url = e.client_url(0);
        let addr: SocketAddr = url.trim_start_matches("http://").parse().unwrap();
        let t = Duration::from_secs(3);
        let a = put(addr, "/t/a", "1", t).unwrap();
        let (cid, mid, rev) = header(&a);
        assert!(cid.is_some() && mid.is_some() && rev.is_some(), "{a}");
        put(addr, "/t/b", "2", t).unwrap();
        put(addr, "/u", "3", t).unwrap();
        let kvs = range_prefix(addr, "/t/", t).unwrap();
        assert_eq!(kvs.len(), 2, "{kvs:?}");
        assert_eq!(kvs[0].key, "/t/a");
        assert_eq!(kvs[0].value, "1");
        assert_eq!(Some(kvs[0].mod_revision), rev);
        let (c, ms) = member_list(addr, t).unwrap();
        assert_eq!(Some(c), cid);
        assert_eq!(ms.len(), 1);
        assert!(!ms[0].is_learner);
        assert_eq!(ms[0].name, e.name(0));
        assert_eq!(ms[0].client_urls, vec![url.clone()]);
    }
}
