//! Fuzz the crm_mon parser and everything built on what it accepts: no input
//! may panic. Run with `cargo fuzz run parse` from crm-xml/ (nightly), seeded
//! with the fixtures: `cargo fuzz run parse ../tests/fixtures/crm_mon/*/`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(doc) = crm_xml::parse_bytes(data) {
        let opts = crm_xml::report::Options::default();
        let now = time::OffsetDateTime::UNIX_EPOCH;
        let report = crm_xml::report::build(&doc, &opts, None, now);
        let _ = crm_xml::health::evaluate(&report, now, &Default::default());
        let _ = report.to_json();
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = crm_xml::cib::FenceTargets::from_cib(s);
        let _ = crm_xml::cib::corosync_addresses(s);
    }
});
