//! Every command a message of the daemon, the agent or the report, or a
//! page of docs/, tells the operator to run (pcs, Pacemaker's tools,
//! systemctl, journalctl, apt-get, dpkg) exists on a node of the documented
//! install: the package installed with pcs, its units there, each
//! subcommand, option, unit, package, cluster option and agent parameter
//! known (`warden_integration::commands` writes the checks).

use std::time::Duration;

use super::FieldCluster;
use warden_integration::commands;

/// Runs the checks on node-a; panics with each command that names
/// something missing.
pub fn commands(c: &FieldCluster) {
    let cmds = commands::node_commands().unwrap();
    assert!(cmds.len() > 80, "only {} commands found", cmds.len());
    let out = c
        .node_cmd_stdin(
            "node-a",
            &["bash", "-s"],
            &commands::node_script(&cmds),
            Duration::from_secs(300),
        )
        .unwrap();
    assert!(
        out.status.success(),
        "the check script failed: {}",
        out.stderr
    );
    let missing = commands::failures(&cmds, &out.stdout);
    eprintln!(
        "field commands: {} commands checked on node-a, {} name something missing",
        cmds.len(),
        missing.len()
    );
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
