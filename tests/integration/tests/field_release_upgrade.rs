//! The Debian 12 → 13 rolling upgrade of a live pair on field nodes; see
//! `field_support::release_upgrade`.

#![allow(clippy::unwrap_used)]

mod field_support;

#[test]
fn field_release_upgrade() {
    let (c, _work) = field_support::release_upgrade::cluster().unwrap();
    field_support::release_upgrade::release_upgrade(&c);
}
