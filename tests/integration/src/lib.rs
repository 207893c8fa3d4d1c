//! Library code of the integration tests (the tests themselves live in
//! `tests/`): the failover scenarios, the failover benchmark and the demo's
//! figures share it.
//!
//! - [`bins`]: the project's binaries, built on demand, and the agent installed
//!   where Pacemaker looks for it.
//! - [`gateway`]: etcd's client API through `etcdctl -w json`, called from inside a node's network
//!   namespace.
//! - [`writer`]: clients writing throughout a fault, recording every
//!   acknowledged write, and the checks run on those records afterwards.
//! - [`campaign`]: randomised rounds of compound faults, each judged for
//!   lost writes, broken order, split brain and a pair that stays stuck.
//! - [`fill`]: bringing an etcd to a production-like database size, and a
//!   steady write load.
//! - [`field`]: the field cluster's package, writers, checks and power-cut
//!   cycle (nodes booted with systemd, see `warden_harness::field`).
//! - [`floor`]: plain etcd's forced restart and learner catch-up on a copy of
//!   the same data, the floor of the failover figures.
//! - [`watcher`]: watches of a key prefix throughout a fault, checked for
//!   what etcd's watch promises (each revision once, in order, none skipped
//!   without a compaction error, one history).
//! - [`twonode`]: a Pacemaker cluster with an etcd-warden daemon in every node,
//!   configured as the docs say, and its observations (members, daemon status,
//!   archives).

pub mod bench;
pub mod bins;
pub mod campaign;
pub mod commands;
pub mod field;
pub mod fill;
pub mod floor;
pub mod gateway;
pub mod monitor;
pub mod sandbox;
pub mod twonode;
pub mod watcher;
pub mod writer;
