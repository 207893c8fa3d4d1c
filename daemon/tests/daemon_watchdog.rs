//! The watchdog never waits on a pass: a failover pass held for several
//! times systemd's watchdog interval (as a legitimate 60 s join is) keeps
//! the WATCHDOG=1 pings coming at their pace, and a shutdown is answered
//! within 5 s while the pass still runs.
//!
//! The daemon runs in this test's process (real etcd, standalone setup) with
//! a slow pass in the failover loop's place; the pings are read from a real
//! notification socket (a Unix datagram socket standing where systemd's
//! would be), found through the environment as sd_notify finds systemd's.

// Test code, not input paths.
#![allow(clippy::unwrap_used)]
// The environment is set once, before this process starts any thread of its
// own; nextest runs each test in a process of its own, and this file holds
// one test.
#![allow(unsafe_code)]

mod common;

use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use etcd_warden::core::Core;
use etcd_warden::run::{BoxFuture, Options, Pass};

/// systemd's `WatchdogSec=` for this test.
const WATCHDOG: Duration = Duration::from_secs(1);

/// A pass that takes `hold` (within its `limit`, like a join waiting for
/// etcd), and says when it began and whether it ended.
struct SlowPass {
    hold: Duration,
    limit: Duration,
    entered: Mutex<Option<Instant>>,
    ended: AtomicBool,
}

impl Pass for SlowPass {
    fn run<'a>(&'a self, _core: &'a Arc<Core>) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            self.entered.lock().unwrap().get_or_insert(Instant::now());
            tokio::time::sleep(self.hold).await;
            self.ended.store(true, Ordering::SeqCst);
            false
        })
    }

    fn kicked(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::pending())
    }

    fn limit(&self) -> Duration {
        self.limit
    }
}

/// Kills etcd should the test fail before the daemon stopped it.
struct EtcdGuard(u32);

impl Drop for EtcdGuard {
    fn drop(&mut self) {
        if alive(self.0) {
            kill(self.0, 9);
        }
    }
}

#[test]
fn watchdog_pings_go_on_through_a_long_pass_and_shutdown_is_prompt() {
    let sockdir = tempfile::tempdir().unwrap();
    let path = sockdir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    // SAFETY: no other thread of this process exists yet (see the top).
    unsafe {
        std::env::set_var("NOTIFY_SOCKET", &path);
        std::env::set_var("WATCHDOG_USEC", WATCHDOG.as_micros().to_string());
        std::env::set_var("WATCHDOG_PID", std::process::id().to_string());
    }
    let got: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let got = got.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !done.load(Ordering::SeqCst) {
                if let Ok(n) = sock.recv(&mut buf) {
                    let m = String::from_utf8_lossy(&buf[..n]).into_owned();
                    got.lock().unwrap().push((Instant::now(), m));
                }
            }
        })
    };

    let dir = tempfile::tempdir().unwrap();
    let settings = etcd_warden::standalone::prepare(dir.path(), None, true).unwrap();
    let pass = Arc::new(SlowPass {
        hold: Duration::from_secs(120),
        limit: settings.timeouts.start_timeout,
        entered: Mutex::new(None),
        ended: AtomicBool::new(false),
    });
    let options = Options {
        pass: Some(pass.clone()),
        ..Default::default()
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let stopped_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let daemon = {
        let stopped_at = stopped_at.clone();
        std::thread::spawn(move || {
            // As the binary runs it: one thread.
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let r = rt.block_on(etcd_warden::run::run_with(settings, options, async {
                let _ = stop_rx.await;
            }));
            *stopped_at.lock().unwrap() = Some(Instant::now());
            r
        })
    };

    let pings_after = |t: Instant| -> Vec<Instant> {
        got.lock()
            .unwrap()
            .iter()
            .filter(|(at, m)| *at >= t && m.contains("WATCHDOG=1"))
            .map(|(at, _)| *at)
            .collect()
    };
    // READY=1 (etcd started), then the pass begins.
    wait_for("READY=1", Duration::from_secs(30), || {
        got.lock()
            .unwrap()
            .iter()
            .any(|(_, m)| m.contains("READY=1"))
            .then_some(())
    });
    let etcd = EtcdGuard(wait_for("etcd's PID file", Duration::from_secs(5), || {
        std::fs::read_to_string(dir.path().join("state/etcd.pid"))
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse().ok())
    }));
    let entered = wait_for("the slow pass to begin", Duration::from_secs(10), || {
        *pass.entered.lock().unwrap()
    });
    // Hold it for three watchdog intervals, observed through the pings.
    let held = WATCHDOG * 3;
    wait_for(
        "pings for three watchdog intervals into the pass",
        held + Duration::from_secs(5),
        || {
            pings_after(entered)
                .last()
                .is_some_and(|t| *t >= entered + held)
                .then_some(())
        },
    );
    assert!(
        !pass.ended.load(Ordering::SeqCst),
        "the pass ended early; nothing was held"
    );
    // systemd kills a daemon whose pings are WatchdogSec apart; they came
    // at half of it all along.
    let pings = pings_after(entered);
    let mut last = entered;
    for t in &pings {
        assert!(
            t.duration_since(last) < WATCHDOG,
            "a gap of {:?} between pings while the pass ran ({} pings)",
            t.duration_since(last),
            pings.len()
        );
        last = *t;
    }
    assert!(pings.len() >= 5, "{} pings", pings.len());

    // Shutdown while the pass still runs: answered within 5 s.
    let asked = Instant::now();
    stop_tx.send(()).unwrap();
    wait_for("the daemon to stop", Duration::from_secs(5), || {
        daemon.is_finished().then_some(())
    });
    let took = stopped_at.lock().unwrap().unwrap().duration_since(asked);
    daemon.join().unwrap().unwrap();
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
    assert!(
        !pass.ended.load(Ordering::SeqCst),
        "the pass was waited for to its end"
    );
    let stopping = got
        .lock()
        .unwrap()
        .iter()
        .find(|(_, m)| m.contains("STOPPING=1"))
        .map(|(t, _)| *t);
    assert!(
        stopping.is_some_and(|t| t.duration_since(asked) < Duration::from_secs(1)),
        "STOPPING=1 {stopping:?}"
    );
    // etcd was stopped with the daemon.
    assert!(!alive(etcd.0), "etcd (pid {}) outlived the daemon", etcd.0);
    done.store(true, Ordering::SeqCst);
    reader.join().unwrap();
}
