//! Field nodes (systemd as PID 1, the .deb, real pcs): every command the
//! messages and docs tell an operator to run exists there.
//!
//! The scenario itself is in `field_support`; `field_suite` runs it with the
//! other scenarios on Debian 12 and 13 (what `make test-field` runs), this
//! test on a Debian 13 cluster of its own, to debug it alone.
//!
//! Heavy (two booted Debian nodes): run under `flock /tmp/warden-field.lock`.

#![allow(clippy::unwrap_used)]

mod field_support;

#[test]
fn field_commands_named_by_messages_and_docs_exist() {
    let (c, _work) = field_support::cluster().unwrap();
    field_support::commands::commands(&c);
}
