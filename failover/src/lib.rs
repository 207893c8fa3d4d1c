//! The failover decision logic of etcd-warden as a pure function from observed
//! facts to actions ([`decide()`]), and an exhaustive explorer ([`model`]) that
//! checks its safety rules over every interleaving of faults for two nodes
//! (and three in HA mode) up to a bound.
//!
//! Being pure (no I/O, no clock: time comes in as data), `decide` is what the
//! daemon calls with what it observed and what the model checker calls with
//! what a model node would observe. See `docs/failover.md`.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod decide;
pub mod decision;
pub mod facts;
#[cfg(feature = "model")]
pub mod model;

pub use decide::{DownProof, decide, peer_down_proof};
pub use decision::{Decision, StartMode, Step};
pub use facts::*;
#[cfg(feature = "model")]
pub use model::{Mutated, Mutation, decide_with};
