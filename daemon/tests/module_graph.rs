//! No import cycle of any length between the daemon's modules: read from
//! the `crate::`, `super::` and `self::` paths (and a module's own
//! submodules named at the start of a path) in `daemon/src`, comments and
//! test-only modules left out.
//!
//! Checked twice: between the crate's top-level modules (a path through any
//! of their submodules counts, so `core` → `reconcile::ports` and
//! `reconcile::gather` → `core` would be a cycle), and between any two
//! modules where neither contains the other (a module and its own
//! submodules are one unit: a parent re-exporting its child is no cycle).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`reconcile::exec`, "" for the crate root) → its file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            out.insert(parts.join("::"), p);
        }
    }
    out
}

fn parent(m: &str) -> String {
    m.rsplit_once("::")
        .map(|(p, _)| p.to_string())
        .unwrap_or_default()
}

fn join(base: &str, rest: &str) -> String {
    match (base.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_string(),
        (_, true) => base.to_string(),
        _ => format!("{base}::{rest}"),
    }
}

/// The source without comments and without inline `#[cfg(test)]` modules
/// (everything from the first one on: they close the files that have them),
/// and the names of submodules declared test-only.
fn code(text: &str) -> (String, BTreeSet<String>) {
    let mut out = String::new();
    let mut test_mods = BTreeSet::new();
    let mut cfg_test = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("//") {
            continue;
        }
        if t == "#[cfg(test)]" {
            cfg_test = true;
            continue;
        }
        if cfg_test {
            if t.starts_with("#[") {
                continue;
            }
            let decl = t
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            if let Some(name) = decl.strip_prefix("mod ") {
                if let Some(name) = name.strip_suffix(';') {
                    test_mods.insert(name.trim().to_string());
                    cfg_test = false;
                    continue;
                }
                // An inline test module: the rest of the file.
                break;
            }
            cfg_test = false;
        }
        let line = match line.find("//") {
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    (out, test_mods)
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path (`a::b::c`) in `code` that starts with one of `roots`, group
/// imports (`a::{b, c::d}`) expanded one level.
fn paths(code: &str, roots: &BTreeSet<String>) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !is_ident(chars[i]) || (i > 0 && (is_ident(chars[i - 1]) || chars[i - 1] == ':')) {
            i += 1;
            continue;
        }
        let start = i;
        let mut segs = Vec::new();
        loop {
            let s = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            segs.push(chars[s..i].iter().collect::<String>());
            if i + 2 < chars.len() && chars[i] == ':' && chars[i + 1] == ':' {
                if is_ident(chars[i + 2]) {
                    i += 2;
                    continue;
                }
                if chars[i + 2] == '{' {
                    let end = chars[i..].iter().position(|c| *c == '}').map(|p| p + i);
                    let inner: String = chars[i + 3..end.unwrap_or(chars.len())].iter().collect();
                    for item in inner.split(',') {
                        let item = item.trim().split(' ').next().unwrap_or("");
                        if !item.is_empty() && item != "self" && roots.contains(&segs[0]) {
                            out.push(format!("{}::{}", segs.join("::"), item));
                        }
                    }
                }
            }
            break;
        }
        if segs.len() > 1 && roots.contains(&segs[0]) {
            out.push(segs.join("::"));
        }
        if i == start {
            i += 1;
        }
    }
    out
}

/// Which module `path`, written in module `cur`, names: the longest known
/// module it starts with.
fn resolve(cur: &str, path: &str, mods: &BTreeMap<String, PathBuf>) -> Option<String> {
    let segs: Vec<&str> = path.split("::").collect();
    let (mut base, rest) = match segs[0] {
        "crate" => (String::new(), &segs[1..]),
        "self" => (cur.to_string(), &segs[1..]),
        "super" => {
            let mut b = parent(cur);
            let mut r = &segs[1..];
            while r.first() == Some(&"super") {
                b = parent(&b);
                r = &r[1..];
            }
            (b, r)
        }
        // A submodule of the current module.
        _ => (cur.to_string(), &segs[..]),
    };
    let mut best = None;
    for s in rest {
        base = join(&base, s);
        if mods.contains_key(&base) {
            best = Some(base.clone());
        } else {
            break;
        }
    }
    best
}

fn contains(outer: &str, inner: &str) -> bool {
    outer.is_empty() || inner == outer || inner.starts_with(&format!("{outer}::"))
}

fn top(m: &str) -> &str {
    m.split("::").next().unwrap_or(m)
}

/// The library's modules (test-only ones left out) and who imports whom.
fn graph() -> (
    BTreeMap<String, PathBuf>,
    BTreeMap<String, BTreeSet<String>>,
) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut mods = modules(&src);
    // Test-only modules, and whatever is below them.
    let mut test_only = BTreeSet::new();
    for (m, p) in &mods {
        let (_, t) = code(&std::fs::read_to_string(p).unwrap());
        for name in t {
            test_only.insert(join(m, &name));
        }
    }
    mods.retain(|m, _| !test_only.iter().any(|t| contains(t, m)));
    // The binary's root is not part of the library's graph.
    mods.retain(|_, p| !p.ends_with("main.rs"));

    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, p) in &mods {
        let (text, _) = code(&std::fs::read_to_string(p).unwrap());
        let mut roots: BTreeSet<String> = ["crate", "super", "self"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for sub in mods.keys().filter(|k| !k.is_empty() && parent(k) == *m) {
            roots.insert(sub.rsplit("::").next().unwrap().to_string());
        }
        for path in paths(&text, &roots) {
            if let Some(to) = resolve(m, &path, &mods)
                && to != *m
                && !to.is_empty()
            {
                edges.entry(m.clone()).or_default().insert(to);
            }
        }
    }
    assert!(
        edges
            .get("reconcile::exec")
            .is_some_and(|e| e.contains("reconcile::ports")),
        "the parser found no import it must find: {edges:?}"
    );
    (mods, edges)
}

#[test]
fn no_import_cycle_between_modules() {
    let (_, edges) = graph();
    let mut cycles = Vec::new();
    // Between modules where neither contains the other: a module and its
    // own submodules are one unit, so each edge is lifted to the children of
    // the two modules' deepest common ancestor.
    let mut units: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, tos) in &edges {
        for b in tos {
            if contains(a, b) || contains(b, a) {
                continue;
            }
            let (ua, ub) = below_common(a, b);
            units.entry(ua).or_default().insert(ub);
        }
    }
    for cycle in strongly_connected(&units) {
        cycles.push(explain(&cycle, &edges, |m| unit_in(m, &cycle)));
    }
    // Between top-level modules, through any of their submodules.
    let mut tops: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, tos) in &edges {
        for b in tos {
            if top(a) != top(b) {
                tops.entry(top(a).to_string())
                    .or_default()
                    .insert(top(b).to_string());
            }
        }
    }
    for cycle in strongly_connected(&tops) {
        cycles.push(explain(&cycle, &edges, |m| {
            cycle.contains(top(m)).then(|| top(m).to_string())
        }));
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

/// The two modules just below the deepest module containing both `a` and
/// `b` on their paths (`x::p::q`, `x::r` → `x::p`, `x::r`).
fn below_common(a: &str, b: &str) -> (String, String) {
    let (sa, sb): (Vec<&str>, Vec<&str>) = (a.split("::").collect(), b.split("::").collect());
    let common = sa.iter().zip(&sb).take_while(|(x, y)| x == y).count();
    (sa[..=common].join("::"), sb[..=common].join("::"))
}

/// The member of `cycle` that module `m` is, or lies within.
fn unit_in(m: &str, cycle: &BTreeSet<String>) -> Option<String> {
    cycle.iter().find(|u| contains(u, m)).cloned()
}

/// The strongly connected components of more than one node (Tarjan's
/// algorithm, iterative over the small graph by recursion depth ≤ nodes).
fn strongly_connected(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            if !t.index.contains_key(w.as_str()) {
                visit(t, w);
                let lw = t.low[w.as_str()];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w.as_str()) {
                let iw = t.index[w.as_str()];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = BTreeSet::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// A cycle's members and the imports that close it.
fn explain(
    cycle: &BTreeSet<String>,
    edges: &BTreeMap<String, BTreeSet<String>>,
    unit: impl Fn(&str) -> Option<String>,
) -> String {
    let why: Vec<String> = edges
        .iter()
        .flat_map(|(x, ys)| ys.iter().map(move |y| (x, y)))
        .filter(|(x, y)| match (unit(x), unit(y)) {
            (Some(a), Some(b)) => a != b,
            _ => false,
        })
        .map(|(x, y)| format!("{x} -> {y}"))
        .collect();
    let names: Vec<&str> = cycle.iter().map(String::as_str).collect();
    format!("{} ({})", names.join(", "), why.join(", "))
}

/// The modules that are one outside system's real implementation, or the
/// daemon around the reconciler: the reconciler reaches them only through
/// the traits of `pacemaker`, `etcd::ops` and `supervise`.
const CONCRETE: [&str; 12] = [
    "app",
    "loops",
    "run",
    "server",
    "cmd",
    "report_cycle",
    "tool",
    "pacemaker::tools",
    "etcd::client",
    "supervise::backend",
    "supervise::process",
    "supervise::systemd",
];

/// Types of those modules, re-exported at their module's root.
const CONCRETE_TYPES: [&str; 6] = [
    "LiveEtcd",
    "Connector",
    "CrmTools",
    "AnySupervisor",
    "ProcessSupervisor",
    "SystemdSupervisor",
];

#[test]
fn the_reconciler_imports_no_concrete_backend() {
    let (mods, edges) = graph();
    let mut found = Vec::new();
    for (from, tos) in edges.iter().filter(|(m, _)| top(m) == "reconcile") {
        for to in tos
            .iter()
            .filter(|t| CONCRETE.iter().any(|c| contains(c, t)))
        {
            found.push(format!("{from} -> {to}"));
        }
    }
    let roots: BTreeSet<String> = ["crate", "super", "self"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for (m, p) in mods.iter().filter(|(m, _)| top(m) == "reconcile") {
        let (text, _) = code(&std::fs::read_to_string(p).unwrap());
        for path in paths(&text, &roots) {
            let last = path.rsplit("::").next().unwrap_or(&path);
            if CONCRETE_TYPES.contains(&last) {
                found.push(format!("{m} names {path}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the reconciler reaches past its ports: {found:?}"
    );
}

#[test]
fn no_source_file_of_the_daemon_or_the_failover_logic_is_over_800_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let failover = root.join("../failover/src");
    let mut long = Vec::new();
    for src in [root.join("src"), failover.clone()] {
        for p in modules(&src).values() {
            let text = std::fs::read_to_string(p).unwrap();
            // The lines before a file's own test module are its code.
            let lines = text
                .lines()
                .take_while(|l| l.trim() != "#[cfg(test)]")
                .count();
            let name = p.file_name().unwrap().to_string_lossy();
            // The model checker is test machinery: compiled only with the
            // `model` feature, which only the failover crate's tests enable.
            let test_file = name.starts_with("tests")
                || name.ends_with("_tests.rs")
                || p.starts_with(failover.join("model"));
            if lines > 800 && !test_file {
                long.push(format!("{} ({lines} lines)", p.display()));
            }
        }
    }
    assert!(long.is_empty(), "over 800 lines: {long:?}");
}
