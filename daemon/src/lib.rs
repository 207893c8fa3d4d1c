//! The etcd-warden daemon and CLI as a library, so that the binary stays thin
//! and tests can drive every subcommand without a process.
//! Only what the binary, the tests and the benchmarks use is `pub`; everything
//! else is `pub(crate)`, and `unreachable_pub` keeps it that way.
#![warn(unreachable_pub)]
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod app;
pub(crate) mod atomic_file;
pub mod cli;
pub(crate) mod clock;
pub(crate) mod cmd;
pub mod config;
pub(crate) mod data_layout;
pub(crate) mod defrag;
pub mod etcd;
pub mod kill_point;
pub(crate) mod logging;
pub(crate) mod loops;
pub(crate) mod metrics;
pub mod pacemaker;
pub mod reconcile;
pub(crate) mod recover;
pub mod report_cycle;
pub mod run;
pub mod server;
pub(crate) mod snapshot_file;
pub mod standalone;
pub mod supervise;
pub(crate) mod tasks;
pub mod tool;
