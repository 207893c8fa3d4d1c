//! docs/operations.md §6, restoring an archive after both member
//! directories are gone, on a field cluster of its own (`field_suite` runs
//! it among the other scenarios); see `field_support::restore_archive`.
//!
//! Heavy (two booted Debian nodes): run under `flock /tmp/warden-field.lock`.

#![allow(clippy::unwrap_used)]

mod field_support;

use field_support::{restore_archive, scenario};

#[test]
fn field_restore_archive() {
    let (c, _work) = field_support::cluster().unwrap();
    scenario("restore an archive", || {
        restore_archive::restore_archive(&c)
    });
}
