//! Brings a running etcd to a production-like database size quickly, and
//! loads it with a steady write rate: the data behind the failover figures at
//! 100 MB to several GB.
//!
//! The mix: transactions of 100 small keys (0.5–4 KiB values, the size of
//! most Kubernetes objects) and, one operation in four, a 100 KiB value
//! written to a set of large keys each written about twice, so a fifth of
//! the database is history a compaction can free. Many concurrent requests
//! on one connection keep etcd's commit batching full.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use etcd_client::{Client, ConnectOptions, Txn, TxnOp};

use crate::gateway::NetNs;

/// Size of a large value.
pub const LARGE_VALUE: usize = 100 * 1024;
/// Small keys per transaction.
const SMALL_PER_TXN: u64 = 100;
/// Requests in flight.
const CONCURRENCY: usize = 16;
/// Consecutive failed requests after which a fill gives up.
const MAX_FAILURES: u64 = 50;

/// Parses a size such as `100M`, `1G`, `2G`, `512K` or a byte count
/// (binary units: `1G` is 1 GiB).
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                _ => bail!("size {s:?}: unknown unit {c:?} (use K, M or G)"),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n: f64 = num
        .trim()
        .parse()
        .with_context(|| format!("size {s:?} is not a number with an optional K/M/G"))?;
    ensure!(n > 0.0 && n.is_finite(), "size {s:?} must be positive");
    Ok((n * mult as f64) as u64)
}

/// A size for humans (MiB with one decimal).
pub fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / f64::from(1 << 20))
}

/// What a fill did.
#[derive(Debug, Clone, Copy)]
pub struct FillReport {
    /// etcd's db size at the end.
    pub db_size: u64,
    /// Its in-use part.
    pub in_use: u64,
    /// Small keys written.
    pub small_keys: u64,
    /// Large values written.
    pub large_puts: u64,
    /// Value bytes sent.
    pub bytes: u64,
    /// Wall time.
    pub took: Duration,
}

/// etcd's db size and its in-use part, as `endpoint` reports them.
pub fn db_size(endpoint: &str, ns: Option<&NetNs>) -> Result<(u64, u64)> {
    let ep = endpoint.to_string();
    in_ns(ns, move || {
        runtime()?.block_on(async move {
            let mut c = connect(&ep).await?;
            let s = c.status().await.context("status")?;
            Ok((
                s.db_size().max(0) as u64,
                s.raft_used_db_size().max(0) as u64,
            ))
        })
    })
}

/// Fills the etcd at `endpoint` (`http://host:port`) until its db size
/// reaches `target` bytes, printing progress every 5 s. Keys go under
/// `prefix`. With `ns`, the client runs inside that network namespace.
pub fn fill(endpoint: &str, target: u64, prefix: &str, ns: Option<&NetNs>) -> Result<FillReport> {
    let (ep, prefix) = (endpoint.to_string(), prefix.to_string());
    in_ns(ns, move || {
        runtime()?.block_on(fill_async(ep, target, prefix))
    })
}

/// Socket address of an `http://host:port` URL.
pub fn url(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

fn in_ns<T: Send + 'static>(
    ns: Option<&NetNs>,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    match ns {
        Some(ns) => ns.run(f),
        None => std::thread::spawn(f)
            .join()
            .map_err(|_| anyhow::anyhow!("fill thread panicked"))?,
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building a tokio runtime")
}

async fn connect(ep: &str) -> Result<Client> {
    Client::connect(
        [ep],
        Some(
            ConnectOptions::new()
                .with_connect_timeout(Duration::from_secs(5))
                .with_timeout(Duration::from_secs(60)),
        ),
    )
    .await
    .with_context(|| format!("connecting to etcd at {ep}"))
}

/// Pseudo-random bytes (xorshift): values etcd cannot shortcut, generated
/// once and sliced.
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b'a' + (x % 26) as u8
        })
        .collect()
}

#[derive(Default)]
struct Counters {
    ops: AtomicU64,
    small: AtomicU64,
    large: AtomicU64,
    bytes: AtomicU64,
}

async fn fill_async(ep: String, target: u64, prefix: String) -> Result<FillReport> {
    let t0 = Instant::now();
    let client = connect(&ep).await?;
    let pool = Arc::new(noise(LARGE_VALUE + 8192));
    // Distinct large keys: a fifth of the target, so each is written about
    // twice by the time the large values reach two fifths of it.
    let large_keys = (target / 5 / LARGE_VALUE as u64).max(1);
    let stop = Arc::new(AtomicBool::new(false));
    let n = Arc::new(Counters::default());
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CONCURRENCY {
        let (mut c, pool, stop, n, prefix) = (
            client.clone(),
            pool.clone(),
            stop.clone(),
            n.clone(),
            prefix.clone(),
        );
        tasks.spawn(async move {
            let mut failures = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let op = n.ops.fetch_add(1, Ordering::Relaxed);
                let res = if op % 4 == 0 {
                    let i = op / 4;
                    let key = format!("{prefix}/large/{:08}", i % large_keys);
                    let off = (i as usize * 977) % 8192;
                    let v = pool[off..off + LARGE_VALUE].to_vec();
                    c.put(key, v, None)
                        .await
                        .map(|_| (0, 1, LARGE_VALUE as u64))
                } else {
                    let first = (op - op / 4 - 1) * SMALL_PER_TXN;
                    let mut ops = Vec::with_capacity(SMALL_PER_TXN as usize);
                    let mut bytes = 0u64;
                    for k in first..first + SMALL_PER_TXN {
                        let len = 512 + (k.wrapping_mul(2_654_435_761) % 3584) as usize;
                        let off = (k as usize * 131) % 8192;
                        bytes += len as u64;
                        ops.push(TxnOp::put(
                            format!("{prefix}/small/{k:010}"),
                            pool[off..off + len].to_vec(),
                            None,
                        ));
                    }
                    c.txn(Txn::new().and_then(ops))
                        .await
                        .map(|_| (SMALL_PER_TXN, 0, bytes))
                };
                match res {
                    Ok((s, l, b)) => {
                        failures = 0;
                        n.small.fetch_add(s, Ordering::Relaxed);
                        n.large.fetch_add(l, Ordering::Relaxed);
                        n.bytes.fetch_add(b, Ordering::Relaxed);
                    }
                    Err(e) => {
                        failures += 1;
                        if failures >= MAX_FAILURES {
                            return Err(anyhow::Error::new(e)
                                .context(format!("{failures} requests in a row failed")));
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
            Ok(())
        });
    }
    let mut status = client.clone();
    let mut last_print = Instant::now();
    let result = loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Some(done) = tasks.try_join_next() {
            match done {
                Ok(Err(e)) => break Err(e),
                Err(e) => break Err(anyhow::Error::new(e).context("a fill task died")),
                Ok(Ok(())) => {}
            }
        }
        let s = match status.status().await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("fill: status: {e}");
                continue;
            }
        };
        let (size, used) = (
            s.db_size().max(0) as u64,
            s.raft_used_db_size().max(0) as u64,
        );
        if size >= target || last_print.elapsed() >= Duration::from_secs(5) {
            let secs = t0.elapsed().as_secs_f64();
            let sent = n.bytes.load(Ordering::Relaxed);
            println!(
                "fill: db {} of {} (in use {}), {} small keys, {} large values, {:.1} MiB/s sent, {secs:.0} s",
                mib(size),
                mib(target),
                mib(used),
                n.small.load(Ordering::Relaxed),
                n.large.load(Ordering::Relaxed),
                sent as f64 / f64::from(1 << 20) / secs.max(0.001)
            );
            last_print = Instant::now();
        }
        if size >= target {
            break Ok((size, used));
        }
    };
    stop.store(true, Ordering::Relaxed);
    while let Some(done) = tasks.join_next().await {
        if let Ok(Err(e)) = done
            && result.is_ok()
        {
            eprintln!("fill: a task ended with {e:#}");
        }
    }
    let (db_size, in_use) = result?;
    cut_wal(&client, &prefix).await?;
    Ok(FillReport {
        db_size,
        in_use,
        small_keys: n.small.load(Ordering::Relaxed),
        large_puts: n.large.load(Ordering::Relaxed),
        bytes: n.bytes.load(Ordering::Relaxed),
        took: t0.elapsed(),
    })
}

/// Updates past etcd's default `snapshot-count` (10000): a fill writes its
/// bytes in a few thousand requests, after which etcd has not snapshotted
/// yet and keeps the whole fill in its WAL, as large again as the database.
/// A long-running member has cut its WAL long ago; these tiny updates (of
/// one key) make this one do so too.
async fn cut_wal(client: &Client, prefix: &str) -> Result<()> {
    const TICKS: u64 = 10_001;
    println!("fill: {TICKS} tiny updates so etcd snapshots and cuts its WAL");
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CONCURRENCY {
        let (mut c, next, key) = (client.clone(), next.clone(), format!("{prefix}/tick"));
        tasks.spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < TICKS {
                c.put(key.as_str(), "t", None).await?;
            }
            Ok::<_, etcd_client::Error>(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.context("a tick task died")?
            .context("a tiny update failed")?;
    }
    Ok(())
}

/// A steady writer: `rate` puts per second of 1 KiB values under `prefix`,
/// until stopped. [`Load::stop`] returns what it saw.
pub struct Load {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<LoadReport>>,
}

/// What a [`Load`] did.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// Acknowledged puts.
    pub acked: u64,
    /// Failed puts.
    pub failed: u64,
    /// Achieved rate (acknowledged puts per second).
    pub rate: f64,
    /// Put latency p50 and p99.
    pub p50: Duration,
    /// See `p50`.
    pub p99: Duration,
}

impl Load {
    /// Starts writing to `endpoint` at `rate` puts/s.
    pub fn start(endpoint: &str, rate: u32, prefix: &str) -> Result<Self> {
        ensure!(rate > 0, "a load needs a positive rate");
        let stop = Arc::new(AtomicBool::new(false));
        let (ep, prefix, st) = (endpoint.to_string(), prefix.to_string(), stop.clone());
        let thread =
            std::thread::spawn(move || runtime()?.block_on(load_async(ep, rate, prefix, st)));
        Ok(Self { stop, thread })
    }

    /// Stops the writer and returns its report.
    pub fn stop(self) -> Result<LoadReport> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("load thread panicked"))?
    }
}

async fn load_async(
    ep: String,
    rate: u32,
    prefix: String,
    stop: Arc<AtomicBool>,
) -> Result<LoadReport> {
    let client = connect(&ep).await?;
    let value = noise(1024);
    let t0 = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate)));
    let mut inflight = tokio::task::JoinSet::new();
    let mut lat = Vec::new();
    let (mut acked, mut failed, mut i) = (0u64, 0u64, 0u64);
    let mut account =
        |r: Result<Result<Duration, etcd_client::Error>, tokio::task::JoinError>| match r {
            Ok(Ok(d)) => {
                acked += 1;
                lat.push(d);
            }
            _ => failed += 1,
        };
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let mut c = client.clone();
        let (key, v) = (format!("{prefix}/{:05}", i % 10_000), value.clone());
        i += 1;
        inflight.spawn(async move {
            let t = Instant::now();
            c.put(key, v, None).await.map(|_| t.elapsed())
        });
        while let Some(r) = inflight.try_join_next() {
            account(r);
        }
    }
    while let Some(r) = inflight.join_next().await {
        account(r);
    }
    lat.sort();
    let q = |p: f64| {
        lat.get(((lat.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    Ok(LoadReport {
        acked,
        failed,
        rate: acked as f64 / t0.elapsed().as_secs_f64().max(0.001),
        p50: q(0.5),
        p99: q(0.99),
    })
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("100M").unwrap(), 100 << 20);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5K").unwrap(), 1536);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("").is_err());
        assert!(parse_size("1T").is_err());
        assert!(parse_size("-1G").is_err());
        assert!(parse_size("lots").is_err());
    }
}
