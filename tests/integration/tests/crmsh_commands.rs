//! Every crmsh command a message or a page of docs/ names (the documented
//! alternative to pcs: `crm resource ban …`, `crm configure load update
//! …`) is one that crmsh documents, asked of this host's crmsh with `crm
//! LEVEL help COMMAND` against an empty CIB file (no cluster needed).

#![allow(clippy::unwrap_used)]

use std::process::Command;

use warden_integration::commands;

#[test]
fn every_crmsh_command_named_exists() {
    let cmds = commands::quoted(&commands::sources(), "crm").unwrap();
    assert!(cmds.len() >= 5, "only {} crm commands found", cmds.len());
    let dir = tempfile::tempdir().unwrap();
    let cib = dir.path().join("cib.xml");
    let empty = Command::new("cibadmin").arg("--empty").output().unwrap();
    assert!(empty.status.success(), "cibadmin --empty: {empty:?}");
    std::fs::write(&cib, &empty.stdout).unwrap();
    let mut wrong = Vec::new();
    // crmsh takes seconds to start: each level and command is asked once.
    let mut asked = std::collections::BTreeSet::new();
    for q in &cmds {
        let Some((level, cmd)) = commands::crm_words(&q.cmd) else {
            wrong.push(format!("{q}: no crmsh level and command"));
            continue;
        };
        if !asked.insert((level.clone(), cmd.clone())) {
            continue;
        }
        let out = Command::new("crm")
            .env("CIB_file", &cib)
            .args([level.as_str(), "help", cmd.as_str()])
            .output()
            .unwrap();
        if !out.status.success() {
            wrong.push(format!(
                "{q}: `crm {level} help {cmd}` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    eprintln!(
        "{} crmsh commands checked ({} distinct level and command)",
        cmds.len(),
        asked.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
