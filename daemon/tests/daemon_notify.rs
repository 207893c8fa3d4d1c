//! sd_notify: READY=1 only after the sockets and a first etcd probe,
//! STATUS= on state changes, WATCHDOG=1 pings, STOPPING=1 on SIGTERM —
//! checked on a real notification socket (a Unix datagram socket standing
//! where systemd's would be).

#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::net::UnixDatagram;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use warden_api::{Action, Outcome};

#[test]
fn ready_status_watchdog_and_stopping_are_notified() {
    let sockdir = tempfile::tempdir().unwrap();
    let path = sockdir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let got: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let got = got.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                if let Ok(n) = sock.recv(&mut buf) {
                    let m = String::from_utf8_lossy(&buf[..n]).into_owned();
                    got.lock().unwrap().push((Instant::now(), m));
                }
            }
        })
    };
    let p = path.to_str().unwrap();
    let mut d = Daemon::start_with_env(true, &[("NOTIFY_SOCKET", p), ("WATCHDOG_USEC", "400000")]);

    // READY=1 arrives once, after etcd was started and probed.
    let ready_msg = wait_for("READY=1", Duration::from_secs(15), || {
        got.lock()
            .unwrap()
            .iter()
            .find(|(_, m)| m.contains("READY=1"))
            .cloned()
    });
    assert!(ready_msg.1.contains("STATUS=etcd running"), "{ready_msg:?}");
    // etcd's own READY (it speaks sd_notify too) must not reach the socket.
    let readies = got
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, m)| m.contains("READY=1"))
        .count();
    assert_eq!(readies, 1);

    // Watchdog pings at half of WATCHDOG_USEC.
    wait_for("3 watchdog pings", Duration::from_secs(5), || {
        let n = got
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, m)| m.contains("WATCHDOG=1"))
            .count();
        (n >= 3).then_some(())
    });

    // A state change shows in STATUS=.
    assert_eq!(d.action(Action::Stop, 0, 20_000).outcome, Outcome::Success);
    wait_for("STATUS=etcd stopped", Duration::from_secs(5), || {
        got.lock()
            .unwrap()
            .iter()
            .any(|(_, m)| m.contains("STATUS=etcd stopped"))
            .then_some(())
    });

    // SIGTERM: STOPPING=1, then a clean exit.
    let mut child = d.child.take().unwrap();
    kill(child.id(), 15);
    let st = wait_for("exit", Duration::from_secs(15), || {
        child.try_wait().unwrap()
    });
    assert!(st.success());
    wait_for("STOPPING=1", Duration::from_secs(2), || {
        got.lock()
            .unwrap()
            .iter()
            .any(|(_, m)| m.contains("STOPPING=1"))
            .then_some(())
    });
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    reader.join().unwrap();
}
