//! Everything one reconciler call acts through, as one bundle of the
//! traits each outside system's module owns: Pacemaker
//! ([`crate::pacemaker::Pacemaker`]), etcd ([`crate::etcd::ops::EtcdOps`])
//! and the local etcd's supervision ([`crate::supervise::Supervisor`]).
//! The daemon's app implements the last two (`crate::app`); tests put fakes
//! and a simulated Pacemaker behind them, so that the real gather → decide
//! → execute runs without a cluster.
//!
//! The reconciler depends on these traits only, never on the app: the app
//! holds the reconciler and hands it the ports for each call.

use crate::config::Settings;

pub use crate::etcd::ops::{EtcdOps, EtcdReads, OpsError};
pub use crate::pacemaker::{Pacemaker, PcmkError, SharedPacemaker};
pub use crate::supervise::{PeerDown, Probe, Supervisor};

/// Everything one reconciler call acts through.
pub struct Ports<'a, P: ?Sized, E, S> {
    /// Pacemaker's view and attributes.
    pub pacemaker: &'a P,
    /// The etcd client calls.
    pub etcd: &'a E,
    /// The local etcd's supervision.
    pub supervisor: &'a S,
    /// Validated settings (nodes, URLs, timeouts).
    pub settings: &'a Settings,
}
