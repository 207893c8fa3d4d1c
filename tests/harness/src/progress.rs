//! What the harness is waiting for right now, for progress output.
//!
//! Every [`crate::process::poll`] (and so every wait on Corosync, crm_mon or
//! a node's join) records what it waits for and what it saw last while it
//! runs; a long-running program (the demo) prints [`current`] from a
//! [`Ticker`] so that a wait of a minute shows what it is waiting on instead
//! of looking hung.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

struct Stage {
    what: String,
    since: Instant,
    last_seen: Option<String>,
}

static STAGE: Mutex<Option<Stage>> = Mutex::new(None);

fn lock() -> std::sync::MutexGuard<'static, Option<Stage>> {
    STAGE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Marks the start of a wait for `what`; the wait ends when the returned
/// guard is dropped.
pub fn waiting_for(what: &str) -> StageGuard {
    *lock() = Some(Stage {
        what: what.to_owned(),
        since: Instant::now(),
        last_seen: None,
    });
    StageGuard { _private: () }
}

/// Records what the running wait observed last (shown shortened).
pub fn observed(seen: &str) {
    if let Some(s) = lock().as_mut() {
        s.last_seen = Some(seen.to_owned());
    }
}

/// Ends the current wait when dropped.
#[derive(Debug)]
pub struct StageGuard {
    _private: (),
}

impl Drop for StageGuard {
    fn drop(&mut self) {
        *lock() = None;
    }
}

/// The wait in progress, if any: "waiting for X (12.3s; last: Y)".
pub fn current() -> Option<String> {
    let g = lock();
    let s = g.as_ref()?;
    let mut line = format!(
        "waiting for {} ({:.1}s",
        s.what,
        s.since.elapsed().as_secs_f64()
    );
    if let Some(seen) = &s.last_seen {
        let one_line = seen.split_whitespace().collect::<Vec<_>>().join(" ");
        let short: String = one_line.chars().take(120).collect();
        line.push_str("; last: ");
        line.push_str(&short);
        if short.len() < one_line.len() {
            line.push('…');
        }
    }
    line.push(')');
    Some(line)
}

/// A thread that calls `line()` and prints its answer every `every` until
/// dropped.
pub struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Starts printing `line()` every `every` (nothing when it returns None).
    pub fn start(every: Duration, line: impl Fn() -> Option<String> + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut next = Instant::now() + every;
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                if Instant::now() >= next {
                    next = Instant::now() + every;
                    if let Some(l) = line() {
                        println!("{l}");
                    }
                }
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_current_until_its_guard_drops() {
        let g = waiting_for("node2 to join");
        observed("node1 sees node2 offline\nand more");
        let c = current().unwrap();
        assert!(c.starts_with("waiting for node2 to join ("), "{c}");
        assert!(c.contains("last: node1 sees node2 offline and more"), "{c}");
        drop(g);
        assert_eq!(current(), None);
    }
}
