//! One module per subcommand (or group of closely related subcommands).

pub(crate) mod alert;
pub(crate) mod check_config;
pub(crate) mod collect;
pub(crate) mod control;
pub(crate) mod daemon;
pub(crate) mod defrag;
pub(crate) mod etcdctl;
pub(crate) mod generate;
pub(crate) mod health;
pub(crate) mod members;
pub(crate) mod migrate_data;
pub(crate) mod pcs_config;
pub(crate) mod recover;
pub(crate) mod reload;
pub(crate) mod snapshot;
pub(crate) mod status;
pub(crate) mod target;
