//! The commands that the daemon's, the agent's and the report's messages
//! and the pages of docs/ tell an operator to run, quoted as they quote
//! them (in backticks or single quotes), and the checks that each names a
//! tool, subcommands, options, units, packages and properties that exist
//! where it is run: a node of the documented install (Debian with the
//! package, Pacemaker and pcs) for everything but crmsh, this host for
//! crmsh (the documented alternative to pcs).

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};

/// A command quoted in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quoted {
    pub file: PathBuf,
    pub cmd: String,
}

impl std::fmt::Display for Quoted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let file = self
            .file
            .strip_prefix(crate::bins::workspace())
            .unwrap_or(&self.file);
        write!(f, "{}: `{}`", file.display(), self.cmd)
    }
}

/// The tools whose commands a node of the documented install checks.
pub const NODE_TOOLS: &[&str] = &[
    "pcs",
    "crm_resource",
    "crm_attribute",
    "crm_mon",
    "crm_node",
    "crm_verify",
    "stonith_admin",
    "cibadmin",
    "corosync-cmapctl",
    "corosync-cfgtool",
    "systemctl",
    "journalctl",
    "apt-get",
    "apt",
    "dpkg",
];

/// The files and directories whose quoted commands are checked.
pub fn sources() -> Vec<PathBuf> {
    let root = crate::bins::workspace();
    [
        "daemon/src",
        "resource-agent/src",
        "crm-xml/src",
        "docs",
        "README.md",
    ]
    .iter()
    .map(|r| root.join(r))
    .collect()
}

/// Every `.rs` and `.md` file under `roots`, sorted.
fn files(roots: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut todo = roots.to_vec();
    while let Some(p) = todo.pop() {
        if p.is_dir() {
            for e in std::fs::read_dir(&p).with_context(|| format!("reading {}", p.display()))? {
                todo.push(
                    e.with_context(|| format!("reading {}", p.display()))?
                        .path(),
                );
            }
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("rs" | "md")) {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// The command that starts at the beginning of `quoted` (the text after an
/// opening quote up to the closing one): a shell pipe, list, substitution
/// or redirection ends it.
fn command_of(quoted: &str) -> &str {
    let cmd = quoted
        .split(['|', ';', '&', '$', '\n'])
        .next()
        .unwrap_or_default();
    cmd.split(" > ").next().unwrap_or_default().trim()
}

/// Every command of `tool` quoted in a file under `roots`: the tool's name
/// right after an opening backtick or single quote, followed by a space or
/// the closing quote.
pub fn quoted(roots: &[PathBuf], tool: &str) -> Result<Vec<Quoted>> {
    let mut found = Vec::new();
    for file in files(roots)? {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        for quote in ['`', '\''] {
            let open = format!("{quote}{tool}");
            for (at, _) in text.match_indices(&open) {
                let rest = &text[at + 1..];
                let Some(end) = rest.find(quote) else {
                    continue;
                };
                let after = rest[tool.len()..].chars().next();
                if !matches!(after, Some(' ')) && end != tool.len() {
                    continue;
                }
                found.push(Quoted {
                    file: file.clone(),
                    cmd: command_of(&rest[..end]).to_string(),
                });
            }
        }
    }
    found.sort_by(|a, b| (&a.cmd, &a.file).cmp(&(&b.cmd, &b.file)));
    found.dedup_by(|a, b| a.cmd == b.cmd);
    Ok(found)
}

/// A subcommand's name: lower-case letters, digits and dashes, starting
/// with a letter.
fn is_word(w: &str) -> bool {
    w.starts_with(|c: char| c.is_ascii_lowercase())
        && w.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A value the operator fills in (`NODE`, `<node>`, `{me}`, `…`), or one of
/// a documented example (`node-a`).
fn is_placeholder(w: &str) -> bool {
    w.contains(['<', '>', '{', '}', '…', '/'])
        || w.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == '-')
        || w.starts_with("node")
}

/// The options of a command's words (`--name` of `--name=value`).
fn options<'a>(words: &[&'a str]) -> Vec<&'a str> {
    words
        .iter()
        .filter(|w| w.starts_with('-') && w.len() > 1 && **w != "--")
        .map(|w| w.split('=').next().unwrap_or(w))
        .collect()
}

/// `s` quoted for a POSIX shell.
fn sh(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The shell functions the checks call; each prints `FAIL <n> <what>` for
/// what it finds missing, nothing otherwise.
const PRELUDE: &str = r#"#!/bin/bash
set -u
fail() { echo "FAIL $1 $2"; }
has_tool() { command -v "$2" >/dev/null || { fail "$1" "no executable $2 on PATH"; return 1; }; }
# An option in a help text: `-x` or `--name` as a word of its own.
in_help() {
  local n=$1 help=$2; shift 2
  for o in "$@"; do
    printf '%s\n' "$help" | grep -qE -- "(^|[^a-zA-Z0-9-])${o}([^a-zA-Z0-9-]|\$)" \
      || fail "$n" "no option $o"
  done
}
# tool [options...]: the options in `tool --help-all`.
chk_pcmk() { local n=$1 t=$2; shift 2; has_tool "$n" "$t" || return; in_help "$n" "$("$t" --help-all 2>&1)" "$@"; }
chk_plain() { has_tool "$1" "$2"; }
# pcs A [B] [options...] [-- key=...]: the help of `pcs A B` is B's own
# (pcs prints its whole section for an unknown B).
chk_pcs() {
  local n=$1 a=$2 b=$3; shift 3
  has_tool "$n" pcs || return
  local help first
  if [ -z "$a" ]; then
    return
  elif [ -z "$b" ]; then
    help=$(pcs "$a" --help 2>&1)
    printf '%s\n' "$help" | grep -q "^Usage: pcs $a " || fail "$n" "pcs has no command $a"
  else
    help=$(pcs "$a" "$b" --help 2>&1)
    first=$(printf '%s\n' "$help" | sed -n '/^Usage:/{n;p;q}' | awk '{print $1}')
    [ "${first#[}" = "$b" ] || { fail "$n" "pcs $a has no command $b"; return; }
  fi
  local keys=0
  for o in "$@"; do
    if [ "$o" = "--" ]; then keys=1; continue; fi
    if [ $keys = 0 ]; then in_help "$n" "$help" "$o"
    else printf '%s\n' "$help" | grep -qF -- "$o=" || fail "$n" "pcs $a $b takes no $o="
    fi
  done
}
# A cluster option Pacemaker knows.
chk_property() {
  local n=$1 p=$2 meta=""
  for d in /usr/lib/pacemaker/pacemaker-schedulerd /usr/lib/pacemaker/pacemaker-controld /usr/lib/pacemaker/pacemaker-fenced; do
    [ -x "$d" ] && meta="$meta$("$d" metadata 2>/dev/null)"
  done
  meta="$meta$(crm_attribute --list-options=cluster --all --output-as=xml 2>/dev/null)"
  printf '%s\n' "$meta" | grep -qF "name=\"$p\"" || fail "$n" "Pacemaker has no cluster option $p"
}
# A parameter of the package's agent.
chk_param() {
  crm_resource --show-metadata ocf:etcd-warden:etcd 2>/dev/null | grep -qF "<parameter name=\"$2\"" \
    || fail "$1" "ocf:etcd-warden:etcd has no parameter $2"
}
# A parameter of the documented fence agent.
chk_fence_param() {
  fence_ipmilan -o metadata 2>/dev/null | grep -qF "<parameter name=\"$2\"" \
    || fail "$1" "fence_ipmilan has no parameter $2"
}
# A unit installed, or the systemd backend's (transient) etcd unit.
chk_unit() {
  local n=$1 u=$2
  case "$u" in *.*) ;; *) u=$u.service ;; esac
  systemctl cat "$u" >/dev/null 2>&1 && return
  grep -qF "unit_name = \"$u\"" /usr/lib/etcd-warden/config.d/00-defaults.toml 2>/dev/null && return
  fail "$n" "no unit $u"
}
chk_package() { dpkg-query -W "$2" >/dev/null 2>&1 || fail "$1" "no package $2"; }
# A verb in a help text, as a listed command (`  verb ...`, `  verb - ...`).
chk_verb() {
  local n=$1 t=$2 v=$3
  "$t" --help 2>&1 | grep -qE "^ +$v( |\$)" || fail "$n" "$t has no command $v"
}
"#;

/// The lines of the node's check script that check `q`, the `n`th command.
fn node_checks(n: usize, q: &Quoted) -> String {
    let words: Vec<&str> = q.cmd.split_whitespace().collect();
    let Some((&tool, args)) = words.split_first() else {
        return format!("fail {n} 'an empty command'\n");
    };
    let opts = options(args);
    let joined = |v: &[&str]| v.iter().map(|s| sh(s)).collect::<Vec<_>>().join(" ");
    let mut out = String::new();
    match tool {
        "pcs" => pcs_checks(n, args, &mut out),
        "systemctl" | "journalctl" => {
            let _ = writeln!(
                out,
                "has_tool {n} {tool} && in_help {n} \"$({tool} --help 2>&1)\" {}",
                joined(&opts)
            );
            let verb = args.iter().find(|w| !w.starts_with('-'));
            if let (Some(v), "systemctl") = (verb, tool) {
                let _ = writeln!(out, "chk_verb {n} systemctl {}", sh(v));
            }
            for u in units(tool, args) {
                let _ = writeln!(out, "chk_unit {n} {}", sh(u));
            }
        }
        "apt-get" | "apt" | "dpkg" => {
            let _ = writeln!(out, "has_tool {n} {tool}");
            match args.iter().find(|w| !w.starts_with('-')) {
                Some(v) if tool != "dpkg" => {
                    let _ = writeln!(out, "chk_verb {n} {tool} {}", sh(v));
                }
                _ => {
                    let _ = writeln!(out, "in_help {n} \"$(dpkg --help 2>&1)\" {}", joined(&opts));
                }
            }
            let skip = usize::from(tool != "dpkg");
            for p in args
                .iter()
                .filter(|w| !w.starts_with('-'))
                .skip(skip)
                .filter(|w| is_word(w) && !is_placeholder(w))
            {
                let _ = writeln!(out, "chk_package {n} {}", sh(p));
            }
        }
        t if t.starts_with("corosync-") => {
            let _ = writeln!(out, "chk_plain {n} {t}");
        }
        t => {
            let _ = writeln!(out, "chk_pcmk {n} {t} {}", joined(&opts));
        }
    }
    out
}

/// The units a `systemctl` or `journalctl` command names.
fn units<'a>(tool: &str, args: &[&'a str]) -> Vec<&'a str> {
    let named = |w: &&str| {
        !w.starts_with('-')
            && !is_placeholder(w)
            && w.starts_with("etcd")
            && w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    };
    match tool {
        "journalctl" => args
            .windows(2)
            .filter(|p| p[0] == "-u")
            .map(|p| p[1])
            .filter(named)
            .collect(),
        _ => args
            .iter()
            .skip_while(|w| w.starts_with('-'))
            .skip(1)
            .copied()
            .filter(named)
            .collect(),
    }
}

/// The checks of `pcs ARGS`: its subcommand (each of `a/b`), its options,
/// and the cluster options, agent parameters or keys its `key=value` words
/// name.
fn pcs_checks(n: usize, args: &[&str], out: &mut String) {
    let cmd: Vec<&str> = args
        .iter()
        .take_while(|w| is_word(w) || (w.contains('/') && w.split('/').all(is_word)))
        .take(2)
        .copied()
        .collect();
    let keys: Vec<&str> = args
        .iter()
        .skip(cmd.len())
        .filter_map(|w| w.split_once('=').map(|(k, _)| k))
        .filter(|k| is_word(&k.replace('_', "-")))
        .collect();
    let opts = options(args);
    let a = cmd.first().copied().unwrap_or_default();
    let bs: Vec<&str> = cmd.get(1).map_or(vec![""], |b| b.split('/').collect());
    let quoted = |v: &[&str]| v.iter().map(|s| sh(s)).collect::<Vec<_>>().join(" ");
    let general = matches!(
        (a, cmd.get(1).copied()),
        ("property", Some("set"))
            | ("resource", Some("update" | "create"))
            | ("stonith", Some("update"))
    );
    for b in bs {
        let _ = write!(out, "chk_pcs {n} {} {} {}", sh(a), sh(b), quoted(&opts));
        if !general && !keys.is_empty() {
            let _ = write!(out, " -- {}", quoted(&keys));
        }
        out.push('\n');
    }
    for k in keys.iter().filter(|_| general) {
        let check = match a {
            "property" => "chk_property",
            "stonith" => "chk_fence_param",
            _ => "chk_param",
        };
        let _ = writeln!(out, "{check} {n} {}", sh(k));
    }
}

/// The script a node of the documented install runs to check `cmds`: it
/// prints `FAIL <index> <what>` for each thing missing.
pub fn node_script(cmds: &[Quoted]) -> String {
    let mut s = PRELUDE.to_string();
    for (n, q) in cmds.iter().enumerate() {
        s.push_str(&node_checks(n, q));
    }
    s
}

/// The commands of every tool in [`NODE_TOOLS`] quoted in [`sources`].
pub fn node_commands() -> Result<Vec<Quoted>> {
    let roots = sources();
    let mut all = Vec::new();
    for tool in NODE_TOOLS {
        all.extend(quoted(&roots, tool)?);
    }
    Ok(all)
}

/// The failures a check script printed, each with the command it is about.
pub fn failures(cmds: &[Quoted], output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|l| l.strip_prefix("FAIL "))
        .map(|l| {
            let (n, what) = l.split_once(' ').unwrap_or((l, ""));
            match n.parse::<usize>().ok().and_then(|n| cmds.get(n)) {
                Some(q) => format!("{q}: {what}"),
                None => format!("command {n}: {what}"),
            }
        })
        .collect()
}

/// The crmsh command words of `crm A B …` (`crm configure load update
/// FILE` is `configure load`): those `crm A help B` documents.
pub fn crm_words(cmd: &str) -> Option<(String, String)> {
    let mut w = cmd.split_whitespace().skip(1).filter(|w| is_word(w));
    Some((w.next()?.to_string(), w.next()?.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(cmd: &str) -> Quoted {
        Quoted {
            file: PathBuf::from("x.md"),
            cmd: cmd.to_string(),
        }
    }

    #[test]
    fn a_command_ends_at_a_pipe_a_list_or_a_redirection() {
        assert_eq!(command_of("crm_mon > /dev/null"), "crm_mon");
        assert_eq!(
            command_of("pcs node standby a && pcs x"),
            "pcs node standby a"
        );
        assert_eq!(
            command_of("journalctl -u etcd-warden | tail"),
            "journalctl -u etcd-warden"
        );
    }

    #[test]
    fn placeholders_and_words() {
        for w in [
            "NODE",
            "<etcd clone>",
            "{me}",
            "node-a",
            "…",
            "disable/enable",
        ] {
            assert!(is_placeholder(w), "{w}");
        }
        for w in ["standby", "etcd-warden", "cib-push"] {
            assert!(is_word(w) && !is_placeholder(w), "{w}");
        }
    }

    #[test]
    fn pcs_checks_name_the_subcommand_its_options_and_keys() {
        let s = node_checks(3, &q("pcs cluster cib-push FILE diff-against=ORIG"));
        assert_eq!(s, "chk_pcs 3 'cluster' 'cib-push'  -- 'diff-against'\n");
        let s = node_checks(1, &q("pcs stonith confirm NODE --force"));
        assert_eq!(s, "chk_pcs 1 'stonith' 'confirm' '--force'\n");
        let s = node_checks(2, &q("pcs resource disable/enable etcd-clone"));
        assert!(s.contains("'disable'") && s.contains("'enable'"), "{s}");
        let s = node_checks(
            0,
            &q("pcs property set load-threshold=2000% stonith-action=off"),
        );
        assert!(s.contains("chk_property 0 'load-threshold'"), "{s}");
        assert!(s.contains("chk_property 0 'stonith-action'"), "{s}");
        let s = node_checks(0, &q("pcs resource update etcd daemon_wait=5"));
        assert!(s.contains("chk_param 0 'daemon_wait'"), "{s}");
        let s = node_checks(4, &q("pcs stonith update fence-node-b ip=ADDR"));
        assert!(s.contains("chk_fence_param 4 'ip'"), "{s}");
        assert!(s.contains("chk_pcs 4 'stonith' 'update'"), "{s}");
    }

    #[test]
    fn systemctl_checks_the_verb_options_and_units() {
        let s = node_checks(5, &q("systemctl enable --now etcd-warden-snapshot.timer"));
        assert!(s.contains("chk_verb 5 systemctl 'enable'"), "{s}");
        assert!(s.contains("'--now'"), "{s}");
        assert!(s.contains("chk_unit 5 'etcd-warden-snapshot.timer'"), "{s}");
        let s = node_checks(6, &q("journalctl -b -u etcd-warden"));
        assert!(
            s.contains("chk_unit 6 'etcd-warden'") && s.contains("'-b'"),
            "{s}"
        );
        let s = node_checks(7, &q("systemctl kill -s KILL etcd-warden-etcd.service"));
        assert!(s.contains("chk_unit 7 'etcd-warden-etcd.service'"), "{s}");
    }

    #[test]
    fn package_tools_check_the_packages_named() {
        let s = node_checks(0, &q("apt-get purge etcd-server"));
        assert!(s.contains("chk_verb 0 apt-get 'purge'"), "{s}");
        assert!(s.contains("chk_package 0 'etcd-server'"), "{s}");
        let s = node_checks(0, &q("dpkg -r etcd-warden"));
        assert!(
            s.contains("'-r'") && s.contains("chk_package 0 'etcd-warden'"),
            "{s}"
        );
    }

    #[test]
    fn failures_name_the_file_and_the_command() {
        let cmds = vec![q("pcs node standby NODE")];
        let f = failures(&cmds, "FAIL 0 pcs node has no command standby\nok\n");
        assert_eq!(
            f,
            vec!["x.md: `pcs node standby NODE`: pcs node has no command standby"]
        );
    }

    #[test]
    fn crm_words_are_the_level_and_the_command() {
        assert_eq!(
            crm_words("crm resource ban <etcd clone> NODE"),
            Some(("resource".into(), "ban".into()))
        );
        assert_eq!(
            crm_words("crm configure load update FILE"),
            Some(("configure".into(), "load".into()))
        );
    }
}
