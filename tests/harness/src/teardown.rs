//! Teardown on SIGINT/SIGTERM/SIGHUP.
//!
//! `Drop` covers returns and panics; a signal kills the process without
//! unwinding, which would leave namespaces, daemons and temp dirs behind.
//! Every live cluster registers here (and anything else behind an
//! [`OnSignal`] guard), and [`teardown_on_signals`] starts a thread that
//! tears them all down before exiting. Handlers (not a blocked
//! signal mask) are used on purpose: a blocked mask would be inherited by
//! every daemon the harness starts, which could then not be stopped with
//! SIGTERM.

use std::sync::{Arc, Mutex, Weak};

use anyhow::{Context, Result};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Something that can tear itself down from another thread, idempotently.
pub(crate) trait Teardown: Send + Sync {
    fn teardown(&self);
}

static REGISTRY: Mutex<Vec<Weak<dyn Teardown>>> = Mutex::new(Vec::new());

pub(crate) fn register(t: Weak<dyn Teardown>) {
    let mut reg = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    reg.retain(|w| w.strong_count() > 0);
    reg.push(t);
}

fn teardown_all() {
    let live: Vec<Arc<dyn Teardown>> = {
        let reg = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        reg.iter().filter_map(Weak::upgrade).collect()
    };
    for t in live {
        t.teardown();
    }
}

/// A clean-up that a signal runs too: registered while the guard lives,
/// forgotten when it is dropped. For what a binary holds outside a cluster
/// (its own temp dir, a process it spawned): `Drop` covers a return or a
/// panic, and this covers SIGINT, SIGTERM and SIGHUP once
/// [`teardown_on_signals`] is installed.
pub struct OnSignal {
    _hook: Arc<dyn Teardown>,
}

struct Hook<F>(F);

impl<F: Fn() + Send + Sync> Teardown for Hook<F> {
    fn teardown(&self) {
        (self.0)();
    }
}

impl OnSignal {
    /// Registers `clean` to run if a signal ends the process while the
    /// returned guard lives. It may run on another thread, at most once
    /// per signal, and must not block for long.
    pub fn new(clean: impl Fn() + Send + Sync + 'static) -> Self {
        let hook: Arc<dyn Teardown> = Arc::new(Hook(clean));
        register(Arc::downgrade(&hook));
        Self { _hook: hook }
    }
}

impl std::fmt::Debug for OnSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnSignal")
    }
}

/// Installs handlers for SIGINT, SIGTERM and SIGHUP that tear down every
/// cluster of this process (etcd and Pacemaker) and then exit with 128+signal.
///
/// Call it once, early, in binaries such as `warden-demo`. Test processes
/// rely on `Drop` instead.
pub fn teardown_on_signals() -> Result<()> {
    let mut signals =
        Signals::new([SIGINT, SIGTERM, SIGHUP]).context("installing signal handlers")?;
    std::thread::Builder::new()
        .name("harness-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                eprintln!("harness: signal {sig} received, tearing everything down");
                teardown_all();
                std::process::exit(128 + sig);
            }
        })
        .context("starting the signal thread")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_guard_runs_its_clean_up_while_it_lives_and_never_after() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let guard = OnSignal::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
        });
        teardown_all();
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        drop(guard);
        teardown_all();
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}
