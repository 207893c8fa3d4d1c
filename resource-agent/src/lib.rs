//! The OCF resource agent `ocf:etcd-warden:etcd` as a library.
//!
//! The agent is deliberately thin: it reads what Pacemaker passes (the
//! action, `OCF_RESKEY_*`, `OCF_CHECK_LEVEL`, the notify lists), checks its
//! own two parameters, sends one [`warden_api::ActionRequest`] to the
//! etcd-warden daemon with a deadline derived from the action's timeout, and
//! maps the answer with [`warden_api::Outcome::ocf_code`]. Every decision
//! about etcd lives in the daemon.
//!
//! When the daemon does not answer, monitor and stop judge and stop etcd
//! themselves from the record the daemon keeps beside its socket (see
//! [`alone`]), so that a dead daemon never gets its node fenced.
//!
//! Exit codes follow OCF 1.1, chosen for how Pacemaker reacts to them: a
//! transient problem (daemon unreachable, slow, refusing) is 1, which
//! Pacemaker recovers in place; 6 (fatal, banned everywhere) only for a
//! parameter that can never work; every failure prints an exit reason.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod alone;
pub mod budget;
pub mod invocation;
pub mod metadata;
pub mod run;
pub mod spec;

pub use alone::{HostNode, Node};
pub use run::{Daemon, EXIT_REASON_PREFIX, Exit, SocketDaemon, run, run_on};
