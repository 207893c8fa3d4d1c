//! The watchdog never waits on a pass: the real failover reconciler, held
//! in its gathering by a Pacemaker whose crm_mon hangs (a fake behind the
//! reconciler's `Pacemaker` port, ignoring its deadline as a wedged tool
//! would) for several times systemd's watchdog interval, keeps the
//! WATCHDOG=1 pings coming at their pace, and a shutdown is answered within
//! 5 s while the pass still hangs.
//!
//! The daemon runs in this test's process (a two-node configuration managed
//! by Pacemaker, so that the failover loop runs) with the slow Pacemaker in
//! place of the command-line tools; the pings are read from a real
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
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use etcd_warden::pacemaker::{Pacemaker, PcmkError};
use etcd_warden::run::Options;

/// systemd's `WatchdogSec=` for this test: short, so that the pass is
/// held over several intervals in seconds, and long enough that a loaded
/// two-core machine (the whole suite beside it) does not stall the
/// daemon's one thread for a whole interval (1 s showed a 1.46 s gap).
const WATCHDOG: Duration = Duration::from_secs(3);

/// Pacemaker whose crm_mon takes `hold` whatever its deadline, saying when
/// the reconciler first asked and whether an answer ever came.
#[derive(Debug)]
struct SlowPacemaker {
    hold: Duration,
    entered: Arc<Mutex<Option<Instant>>>,
    ended: Arc<AtomicBool>,
}

#[async_trait::async_trait]
impl Pacemaker for SlowPacemaker {
    async fn crm_mon(&self, _deadline: Duration) -> Result<crm_xml::CrmMon, PcmkError> {
        self.entered.lock().unwrap().get_or_insert(Instant::now());
        tokio::time::sleep(self.hold).await;
        self.ended.store(true, Ordering::SeqCst);
        Err(PcmkError::Tool(etcd_warden::tool::ToolError::Deadline {
            prog: "crm_mon".into(),
            secs: self.hold.as_secs_f64(),
        }))
    }
    async fn get_attr(
        &self,
        _n: &str,
        _a: &str,
        _d: Duration,
    ) -> Result<Option<String>, PcmkError> {
        Ok(None)
    }
    async fn set_attr(&self, _n: &str, _a: &str, _v: &str, _d: Duration) -> Result<(), PcmkError> {
        Ok(())
    }
    async fn delete_attr(&self, _n: &str, _a: &str, _d: Duration) -> Result<(), PcmkError> {
        Ok(())
    }
    async fn clear_failed_start(&self, _r: &str, _n: &str, _d: Duration) -> Result<(), PcmkError> {
        Ok(())
    }
}

/// Node a of a two-node pair managed by Pacemaker (no autostart).
fn settings(dir: &std::path::Path) -> etcd_warden::config::Settings {
    let text = format!(
        r#"node_name = "a"
topology = "two-node"
[etcd]
binary = "{etcd}"
data_dir = "{d}/etcd"
[api]
socket = "{d}/api.sock"
[paths]
state_dir = "{d}/state"
[failover]
archive_dir = "{d}/archives"
[[nodes]]
name = "a"
peer_urls = ["http://127.0.0.1:{ap}"]
client_urls = ["http://127.0.0.1:{ac}"]
[[nodes]]
name = "b"
peer_urls = ["http://127.0.0.1:{bp}"]
client_urls = ["http://127.0.0.1:{bc}"]
"#,
        etcd = etcd_warden::standalone::find_etcd().display(),
        d = dir.display(),
        ap = free_port(),
        ac = free_port(),
        bp = free_port(),
        bc = free_port(),
    );
    etcd_warden::config::from_texts(&[(PathBuf::from("test.toml"), text)]).unwrap()
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
    let settings = settings(dir.path());
    assert!(etcd_warden::reconcile::enabled(&settings));
    let entered: Arc<Mutex<Option<Instant>>> = Arc::default();
    let ended = Arc::new(AtomicBool::new(false));
    let options = Options {
        pacemaker: Some(std::sync::Arc::new(SlowPacemaker {
            hold: Duration::from_secs(120),
            entered: entered.clone(),
            ended: ended.clone(),
        })),
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
    // READY=1, then the failover pass begins and hangs in crm_mon.
    wait_for("READY=1", Duration::from_secs(30), || {
        got.lock()
            .unwrap()
            .iter()
            .any(|(_, m)| m.contains("READY=1"))
            .then_some(())
    });
    let entered = wait_for(
        "the reconciler to ask the slow crm_mon",
        Duration::from_secs(10),
        || *entered.lock().unwrap(),
    );
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
        !ended.load(Ordering::SeqCst),
        "crm_mon answered early; nothing was held"
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
        !ended.load(Ordering::SeqCst),
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
    done.store(true, Ordering::SeqCst);
    reader.join().unwrap();
}
