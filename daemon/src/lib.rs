//! The etcd-warden daemon and CLI as a library, so that the binary stays thin
//! and tests can drive every subcommand without a process.

pub mod adapters;
pub mod atomic_file;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod config;
pub mod core;
pub mod defrag;
pub mod etcd;
pub mod etcd_conf;
pub mod metrics;
pub mod pcmk_tool;
pub mod reconcile;
pub mod recover;
pub mod report_cycle;
pub mod run;
pub mod server;
pub mod snapshot_file;
pub mod standalone;
pub mod supervise;
pub mod tasks;
