//! One module per subcommand (or group of closely related subcommands).

pub mod alert;
pub mod collect;
pub mod control;
pub mod daemon;
pub mod defrag;
pub mod generate;
pub mod health;
pub mod members;
pub mod pcs_config;
pub mod recover;
pub mod snapshot;
pub mod status;
pub mod target;
