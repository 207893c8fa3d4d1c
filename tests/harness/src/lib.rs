//! Test harness: real etcd and real Corosync/Pacemaker clusters on one machine.
//!
//! - [`EtcdCluster`]: one or N etcd members on 127.0.0.1 with leased ports.
//! - [`Cluster`]: a one-, two- or three-node Pacemaker cluster, each node in
//!   its own network, mount and UTS namespace, fenced by
//!   `fence_warden_testns`; with helpers to run commands in a node, crash,
//!   fence and power on nodes, cut the network, and wait on crm_mon.
//! - [`crm`]: the harness's own crm_mon XML view and predicates.
//! - [`progress`]: what the harness waits for right now, for progress output.
//!
//! Everything is tracked by PID and torn down on drop (also on panic); see
//! `docs/harness.md`.

pub mod crm;
pub mod etcd;
pub mod fence_agent;
pub mod field;
mod field_life;
pub mod field_tls;
pub mod pcmk;
pub mod ports;
pub mod process;
pub mod progress;
mod teardown;

pub use crm::{CrmMon, Expect};
pub use etcd::EtcdCluster;
pub use pcmk::{Cluster, ClusterOptions};
pub use process::CmdOutput;
pub use teardown::{OnSignal, teardown_on_signals};
