//! docs/architecture.md names every module of the daemon crate, one row
//! each in its "Modules of `daemon/src`" table, and names no module that
//! does not exist: a module added, moved or removed without the map fails
//! here.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::Path;

const SECTION: &str = "## Modules of `daemon/src`";

/// Test-only files the map leaves out.
fn test_only(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name == "tests.rs" || name.ends_with("_tests.rs") || name.starts_with("tests_")
}

fn modules(dir: &Path, root: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            modules(&p, root, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if !test_only(&rel) {
                out.insert(rel);
            }
        }
    }
}

/// The first column of the section's table rows, without backquotes.
fn mapped(doc: &str) -> BTreeSet<String> {
    let start = doc.find(SECTION).expect("the module map section");
    let body = &doc[start + SECTION.len()..];
    let end = body.find("\n## ").unwrap_or(body.len());
    body[..end]
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_architecture_map_names_every_module_and_no_other() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = crate_dir.join("src");
    let mut found = BTreeSet::new();
    modules(&src, &src, &mut found);
    let doc = std::fs::read_to_string(crate_dir.join("../docs/architecture.md")).unwrap();
    let map = mapped(&doc);
    let missing: Vec<&String> = found.difference(&map).collect();
    let stale: Vec<&String> = map.difference(&found).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/architecture.md's module map: missing {missing:?}, naming modules that do not exist {stale:?}"
    );
}
