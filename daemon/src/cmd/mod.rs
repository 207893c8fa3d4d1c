//! One module per subcommand.

pub mod collect;
pub mod health;
