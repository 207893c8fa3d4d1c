//! Property tests: no input makes the parser (or the report and health built
//! on what it accepts) panic. Arbitrary bytes, arbitrary strings made of XML
//! punctuation, and real fixtures truncated or with bytes replaced.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use proptest::prelude::*;
use std::sync::OnceLock;

fn fixtures() -> &'static Vec<(String, String)> {
    static F: OnceLock<Vec<(String, String)>> = OnceLock::new();
    F.get_or_init(common::fixtures)
}

fn exercise(input: &[u8]) {
    if let Ok(doc) = crm_xml::parse_bytes(input) {
        let opts = common::options_with_addresses(&doc);
        let r = crm_xml::report::build(&doc, &opts, None, time::OffsetDateTime::UNIX_EPOCH);
        let _ =
            crm_xml::health::evaluate(&r, time::OffsetDateTime::UNIX_EPOCH, &Default::default());
    }
    if let Ok(s) = std::str::from_utf8(input) {
        let _ = crm_xml::cib::FenceTargets::from_cib(s);
        let _ = crm_xml::cib::corosync_addresses(s);
        let _ = crm_xml::timefmt::parse_pacemaker_time(s, time::UtcOffset::UTC);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes(input in proptest::collection::vec(any::<u8>(), 0..512)) {
        exercise(&input);
    }

    #[test]
    fn xmlish_strings(input in "[<>/=\"' a-z_:!?&;#0-9\n-]{0,300}") {
        exercise(input.as_bytes());
    }

    #[test]
    fn truncated_fixtures(idx in 0usize..843, frac in 0.0f64..1.0) {
        let (_, text) = &fixtures()[idx % fixtures().len()];
        let cut = (text.len() as f64 * frac) as usize;
        exercise(&text.as_bytes()[..cut]);
    }

    #[test]
    fn mutated_fixtures(idx in 0usize..843, edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let (_, text) = &fixtures()[idx % fixtures().len()];
        let mut bytes = text.as_bytes().to_vec();
        for (at, b) in edits {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        exercise(&bytes);
    }

    #[test]
    fn garbage_attribute_values(idx in 0usize..843, value in "[^\"<&]{0,20}") {
        let (_, text) = &fixtures()[idx % fixtures().len()];
        // Replace the first boolean attribute value with garbage: either it
        // is still a boolean spelling, or the parser reports it.
        let replaced = text.replacen("\"true\"", &format!("\"{value}\""), 1);
        exercise(replaced.as_bytes());
    }
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    let doc = format!(
        "{}{}",
        "<clone id=\"c\">".repeat(100_000),
        "</clone>".repeat(100_000)
    );
    assert!(crm_xml::parse(&doc).is_err());
    let doc = format!(
        "<pacemaker-result api-version=\"2\"><resources>{}",
        "<clone id=\"c\">".repeat(60)
    );
    assert!(crm_xml::parse(&doc).is_err());
}
