//! The etcd-warden daemon and CLI as a library, so that the binary stays thin
//! and tests can drive every subcommand without a process.

pub mod cli;
pub mod cmd;
