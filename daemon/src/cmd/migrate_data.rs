//! `etcd-warden migrate-data`: move etcd's data from the old default
//! layout (`/var/lib/etcd/warden`, inside Debian's `/var/lib/etcd`) to the
//! default under `/var/lib/etcd-warden`. etcd-warden-migrate-data.service
//! runs it before the daemon, without the daemon's sandbox; see
//! [`crate::data_layout`].

use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::EXIT_CONFIG;
use crate::data_layout::{self, Layout, Plan};

/// Arguments: Move etcd's data from /var/lib/etcd/warden to
/// /var/lib/etcd-warden/data.
#[derive(Debug, clap::Args)]
pub(crate) struct MigrateDataArgs {
    /// The main configuration file (see `etcd-warden daemon --config`).
    #[arg(long, value_name = "PATH", default_value = crate::config::DEFAULT_CONFIG)]
    pub(crate) config: PathBuf,
}

/// Exit 0 when there is nothing to move, when the move is made, and when
/// etcd runs on the old data (it stays there for now); 78 when the move
/// cannot be made (the message says why and how to make it by hand).
pub(crate) fn run_migrate_data(args: MigrateDataArgs) -> anyhow::Result<ExitCode> {
    let settings = crate::config::load(&args.config)?;
    let Some(l) = Layout::of(&settings) else {
        return Ok(ExitCode::SUCCESS);
    };
    let refuse = |why: String| {
        eprintln!(
            "etcd-warden: error: etcd's data was not moved from {} to {}: {why}; {}",
            l.old_data.display(),
            l.data.display(),
            data_layout::manual_steps(&l, &settings.node_name)
        );
        Ok(ExitCode::from(EXIT_CONFIG))
    };
    match data_layout::plan(&l, &settings.state_dir) {
        Plan::Nothing => {
            say_tidied(&data_layout::tidy(&l));
            Ok(ExitCode::SUCCESS)
        }
        Plan::InUse(why) => {
            eprintln!(
                "etcd-warden: etcd's data stays in {} for now: {why}; it moves to {} when etcd-warden starts while etcd is stopped on this node (`pcs node standby {node}`, `systemctl restart etcd-warden`, `pcs node unstandby {node}`)",
                l.old_data.display(),
                l.data.display(),
                node = settings.node_name
            );
            Ok(ExitCode::SUCCESS)
        }
        Plan::Conflict(why) => refuse(why),
        Plan::Move(moves, lock) => {
            let moved = data_layout::apply(&moves);
            drop(lock);
            match moved {
                Ok(()) => {
                    for (from, to) in &moves {
                        eprintln!(
                            "etcd-warden: moved {} to {} (a rename on one filesystem, synced)",
                            from.display(),
                            to.display()
                        );
                    }
                    say_tidied(&data_layout::tidy(&l));
                    Ok(ExitCode::SUCCESS)
                }
                Err(why) => refuse(why),
            }
        }
    }
}

/// One line per empty old directory removed.
fn say_tidied(dirs: &[PathBuf]) {
    for d in dirs {
        eprintln!("etcd-warden: removed the empty {}", d.display());
    }
}
