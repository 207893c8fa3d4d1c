//! Teardown on SIGINT/SIGTERM/SIGHUP.
//!
//! `Drop` covers returns and panics; a signal kills the process without
//! unwinding, which would leave namespaces, daemons and temp dirs behind.
//! Every live cluster registers here, and [`teardown_on_signals`] starts a
//! thread that tears them all down before exiting. Handlers (not a blocked
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
