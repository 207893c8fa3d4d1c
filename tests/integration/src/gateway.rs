//! etcd's v3 JSON gateway (`POST /v3/kv/put`, `/v3/kv/range`,
//! `/v3/cluster/member/list`), spoken over a plain blocking HTTP/1.1
//! connection from a thread that entered a node's network namespace: the
//! nodes' addresses exist only inside the namespaces the harness created.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use nix::sched::{CloneFlags, setns};
use serde_json::{Value, json};

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

/// One `POST path` with a JSON body; returns the parsed answer of a 200, an
/// error naming the status and body otherwise. Must run inside the node's
/// namespace (see [`NetNs::run`]).
pub fn post(addr: SocketAddr, path: &str, body: &Value, timeout: Duration) -> Result<Value> {
    let body = body.to_string();
    let mut s = TcpStream::connect_timeout(&addr, timeout)
        .with_context(|| format!("connecting to {addr}"))?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let _ = s.set_nodelay(true);
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .with_context(|| format!("sending to {addr}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .with_context(|| format!("reading the answer of {addr}{path}"))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .with_context(|| format!("no HTTP header end in {text:?}"))?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("no HTTP status in {head:?}"))?;
    let chunked = head
        .lines()
        .any(|l| l.to_ascii_lowercase().starts_with("transfer-encoding:") && l.contains("chunked"));
    let payload = if chunked {
        dechunk(rest)?
    } else {
        rest.to_string()
    };
    ensure!(
        status == 200,
        "{addr}{path}: HTTP {status}: {}",
        payload.trim()
    );
    let v: Value = serde_json::from_str(&payload)
        .with_context(|| format!("{addr}{path}: not JSON: {payload:?}"))?;
    if let Some(e) = v.get("error") {
        bail!("{addr}{path}: {e}");
    }
    Ok(v)
}

fn dechunk(mut s: &str) -> Result<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = s.split_once("\r\n").context("truncated chunk header")?;
        let n = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .with_context(|| format!("bad chunk size {size:?}"))?;
        if n == 0 {
            return Ok(out);
        }
        ensure!(rest.len() >= n, "truncated chunk");
        out.push_str(&rest[..n]);
        s = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
}

/// The header of a gateway answer: (cluster id, member id, revision).
pub fn header(v: &Value) -> (Option<u64>, Option<u64>, Option<u64>) {
    let h = v.get("header");
    let f = |k: &str| h.and_then(|h| h.get(k)).and_then(num);
    (f("cluster_id"), f("member_id"), f("revision"))
}

/// A put; returns the answer (its header carries the revision).
pub fn put(addr: SocketAddr, key: &str, value: &str, timeout: Duration) -> Result<Value> {
    post(
        addr,
        "/v3/kv/put",
        &json!({"key": b64(key), "value": b64(value)}),
        timeout,
    )
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

/// Every key under `prefix`, read linearizably (a read that needs quorum).
pub fn range_prefix(addr: SocketAddr, prefix: &str, timeout: Duration) -> Result<Vec<Kv>> {
    let mut end = prefix.as_bytes().to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    let end = String::from_utf8(end).context("prefix end")?;
    let v = post(
        addr,
        "/v3/kv/range",
        &json!({"key": b64(prefix), "range_end": b64(&end)}),
        timeout,
    )?;
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
}

/// The member list and the cluster id as `addr` answers them.
pub fn member_list(addr: SocketAddr, timeout: Duration) -> Result<(u64, Vec<Member>)> {
    let v = post(addr, "/v3/cluster/member/list", &json!({}), timeout)?;
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
            peer_urls: m
                .get("peerURLs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|u| u.as_str().map(str::to_owned))
                .collect(),
        });
    }
    Ok((cluster.unwrap_or(0), out))
}
