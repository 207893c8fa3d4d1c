//! `etcd-warden generate` (hidden): the man pages and shell completions that
//! `make install` and `make deb` ship, produced by the installed binary
//! itself, so that the pages always match the clap definitions and the
//! install needs no cargo.
//!
//! - `generate man DIR`: `etcd-warden.8` and one page per subcommand
//!   (`etcd-warden-status.8`, `etcd-warden-snapshot-save.8`, ...).
//! - `generate completions DIR`: `etcd-warden.bash`, `_etcd-warden` (zsh)
//!   and `etcd-warden.fish`.
//! - `generate ocf-man --metadata FILE DIR`: the OCF agent's page
//!   (`ocf_etcd-warden_etcd.7`) rendered from its `meta-data` output, so the
//!   parameters, defaults and timeouts on the page are the ones Pacemaker is
//!   told.

use std::fmt::Write as _;
use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap_complete::Shell;

/// The binary's name, as installed.
const BIN: &str = "etcd-warden";

/// The man section of the CLI: administration commands (it runs as root and
/// manages a system service).
const CLI_SECTION: &str = "8";

/// Arguments of `etcd-warden generate`.
#[derive(Debug, clap::Args)]
pub(crate) struct GenerateArgs {
    /// What to generate.
    #[command(subcommand)]
    pub(crate) what: GenerateWhat,
}

/// The generated artefacts.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum GenerateWhat {
    /// Write etcd-warden.8 and one page per subcommand into DIR.
    Man {
        /// The output directory (created if missing).
        dir: PathBuf,
    },
    /// Write the bash, zsh and fish completions into DIR.
    Completions {
        /// The output directory (created if missing).
        dir: PathBuf,
    },
    /// Render an OCF agent's meta-data XML into its section 7 man page.
    OcfMan {
        /// The meta-data XML (`AGENT meta-data > FILE`); `-` reads stdin.
        #[arg(long, value_name = "FILE")]
        metadata: PathBuf,
        /// The OCF provider the agent is installed under (its page is
        /// `ocf_PROVIDER_NAME.7`).
        #[arg(long, default_value = "etcd-warden")]
        provider: String,
        /// The output directory (created if missing).
        dir: PathBuf,
    },
}

/// Runs `etcd-warden generate`; prints each file written.
/// `cli` is the whole command line's definition (the pages and completions
/// describe it); the caller owns it, so that this module does not depend on
/// the module that dispatches to it.
pub(crate) fn run_generate(args: GenerateArgs, cli: &clap::Command) -> anyhow::Result<ExitCode> {
    let written = match args.what {
        GenerateWhat::Man { dir } => write_man_pages(&dir, cli)?,
        GenerateWhat::Completions { dir } => write_completions(&dir, cli)?,
        GenerateWhat::OcfMan {
            metadata,
            provider,
            dir,
        } => {
            let xml = read_input(&metadata)?;
            let page = render_ocf_man(&xml, &provider)
                .with_context(|| format!("rendering the meta-data in {}", metadata.display()))?;
            create_dir(&dir)?;
            let path = dir.join(format!("{}.7", page.name));
            write_file(&path, page.text.as_bytes())?;
            vec![path]
        }
    };
    for p in written {
        println!("{}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn read_input(path: &Path) -> anyhow::Result<String> {
    if path == Path::new("-") {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading the meta-data from stdin")?;
        Ok(s)
    } else {
        fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
    }
}

fn create_dir(dir: &Path) -> anyhow::Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}

fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// The CLI with every subcommand's bin and display names filled in (clap
/// does that in `build`), which the pages' NAME and SYNOPSIS use.
fn built_cli(cli: &clap::Command) -> clap::Command {
    let mut cmd = cli.clone();
    cmd.build();
    cmd
}

/// Whether a subcommand gets a page: hidden ones (this one) and clap's
/// generated `help` do not.
fn documented(cmd: &clap::Command) -> bool {
    !cmd.is_hide_set() && cmd.get_name() != "help"
}

/// Writes the CLI's pages into `dir`, returning their paths.
pub(crate) fn write_man_pages(dir: &Path, cli: &clap::Command) -> anyhow::Result<Vec<PathBuf>> {
    create_dir(dir)?;
    let mut written = Vec::new();
    write_page(&built_cli(cli), dir, &mut written)?;
    Ok(written)
}

fn write_page(cmd: &clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let name = page_name(cmd);
    let man = clap_mangen::Man::new(cmd.clone())
        .title(name.to_uppercase())
        .section(CLI_SECTION)
        .date(page_date())
        .source(format!("{BIN} {}", env!("CARGO_PKG_VERSION")))
        .manual("System Administration");
    let mut buf = Vec::new();
    man.render(&mut buf)
        .with_context(|| format!("rendering the page of {name}"))?;
    let page = extra_sections(&String::from_utf8_lossy(&buf));
    let path = dir.join(format!("{name}.{CLI_SECTION}"));
    write_file(&path, page.as_bytes())?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| documented(s)) {
        write_page(sub, dir, written)?;
    }
    Ok(())
}

/// clap_mangen renders `after_long_help` as one section named EXTRA. Its
/// blocks (separated by empty lines) become sections of their own: a block
/// headed `Exit status:` becomes EXIT STATUS and one headed `Files:` FILES,
/// one tagged paragraph per `ITEM  meaning` line; a block without a heading
/// is a paragraph of the section before it.
fn extra_sections(page: &str) -> String {
    const EXTRA: &str = ".SH EXTRA\n";
    let Some(at) = page.find(EXTRA) else {
        return page.to_string();
    };
    let rest = &page[at + EXTRA.len()..];
    let end = rest.find("\n.SH ").map_or(rest.len(), |i| i + 1);
    let mut out = page[..at].to_string();
    for block in rest[..end].split("\n\n") {
        let mut lines = block.lines().filter(|l| !l.trim().is_empty());
        let Some(first) = lines.next() else {
            continue;
        };
        match section_title(first) {
            Some(title) => {
                out.push_str(&format!(".SH \"{title}\"\n"));
                for line in lines {
                    let (item, meaning) = line
                        .trim()
                        .split_once(char::is_whitespace)
                        .unwrap_or((line.trim(), ""));
                    out.push_str(&format!(".TP\n\\fB{item}\\fR\n{}\n", meaning.trim()));
                }
            }
            None => {
                out.push_str(".PP\n");
                for line in std::iter::once(first).chain(lines) {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
    }
    out.push_str(&rest[end..]);
    out
}

/// `EXIT STATUS` for a block's first line `Exit status:`: words and a
/// colon, nothing else.
fn section_title(line: &str) -> Option<String> {
    let t = line.trim().strip_suffix(':')?;
    let words = !t.is_empty() && t.chars().all(|c| c.is_ascii_alphabetic() || c == ' ');
    words.then(|| t.to_uppercase())
}

/// The date on the pages: SOURCE_DATE_EPOCH (reproducible builds; the
/// package sets it to the last commit's time) or today. An empty date would
/// shift the later `.TH` fields.
fn page_date() -> String {
    let at = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .and_then(|t| time::OffsetDateTime::from_unix_timestamp(t).ok())
        .unwrap_or_else(time::OffsetDateTime::now_utc);
    let format = time::macros::format_description!("[year]-[month]-[day]");
    at.format(format).unwrap_or_default()
}

/// `etcd-warden` for the top level, `etcd-warden-snapshot-save` below it.
fn page_name(cmd: &clap::Command) -> String {
    cmd.get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string()
}

/// Writes the completions into `dir`, returning their paths.
pub(crate) fn write_completions(dir: &Path, cli: &clap::Command) -> anyhow::Result<Vec<PathBuf>> {
    create_dir(dir)?;
    let mut written = Vec::new();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let mut cmd = cli.clone();
        let path = clap_complete::generate_to(shell, &mut cmd, BIN, dir)
            .with_context(|| format!("writing the {shell} completion into {}", dir.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// A rendered OCF man page.
#[derive(Debug)]
pub(crate) struct OcfPage {
    /// `ocf_PROVIDER_NAME`, the page's name and file stem.
    pub(crate) name: String,
    /// The roff source.
    pub(crate) text: String,
}

/// Renders an OCF agent's meta-data into a section 7 man page in the style
/// of the resource-agents package's pages: description, every parameter with
/// its type and default, every action with its timeout, interval and depth.
pub(crate) fn render_ocf_man(xml: &str, provider: &str) -> anyhow::Result<OcfPage> {
    // The DOCTYPE names a DTD roxmltree does not need.
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(xml, opts)
        .context("the meta-data is not well-formed XML")?;
    let ra = doc.root_element();
    let agent = agent_name(ra)?;
    if provider.is_empty() || provider.contains(['/', ' ']) {
        bail!("bad OCF provider name {provider:?}");
    }
    let name = format!("ocf_{provider}_{agent}");
    let mut t = String::with_capacity(4096);
    write_ocf_head(&mut t, ra, &name, provider, agent);
    write_ocf_parameters(&mut t, ra)?;
    write_ocf_actions(&mut t, ra)?;
    write_ocf_tail(&mut t);
    Ok(OcfPage { name, text: t })
}

/// The agent's name, from a `<resource-agent>` root element.
fn agent_name<'a>(ra: roxmltree::Node<'a, '_>) -> anyhow::Result<&'a str> {
    if ra.tag_name().name() != "resource-agent" {
        bail!(
            "the meta-data's root element is <{}>, expected <resource-agent>",
            ra.tag_name().name()
        );
    }
    ra.attribute("name")
        .filter(|n| !n.is_empty())
        .context("<resource-agent> has no name attribute")
}

/// The page's title line and its NAME, SYNOPSIS and DESCRIPTION sections.
fn write_ocf_head(
    t: &mut String,
    ra: roxmltree::Node<'_, '_>,
    name: &str,
    provider: &str,
    agent: &str,
) {
    let version = ra.attribute("version").unwrap_or("");
    let shortdesc = child_text(ra, "shortdesc").unwrap_or_default();
    let longdesc = child_text(ra, "longdesc").unwrap_or_default();
    let _ = writeln!(
        t,
        ".TH {} 7 \"{}\" \"{}\" \"OCF resource agents\"",
        quoted_arg(&name.to_uppercase()),
        page_date(),
        quoted_arg(format!("{provider} {version}").trim()),
    );
    t.push_str(".SH NAME\n");
    let _ = writeln!(t, "{} \\- {}", escape(name), escape(&shortdesc));
    t.push_str(".SH SYNOPSIS\n");
    let _ = writeln!(
        t,
        "\\fBpcs resource create\\fR \\fIresource_id\\fR \\fBocf:{}:{}\\fR [\\fIparameter\\fR=\\fIvalue\\fR ...]",
        escape(provider),
        escape(agent)
    );
    t.push_str(".SH DESCRIPTION\n");
    let _ = writeln!(t, "{}", escape(&longdesc));
}

/// The PARAMETERS section: each parameter with its type, whether it is
/// required or unique, its default, and its descriptions.
fn write_ocf_parameters(t: &mut String, ra: roxmltree::Node<'_, '_>) -> anyhow::Result<()> {
    t.push_str(".SH PARAMETERS\n");
    let params: Vec<_> = ra
        .children()
        .filter(|n| n.has_tag_name("parameters"))
        .flat_map(|n| n.children().filter(|c| c.has_tag_name("parameter")))
        .collect();
    if params.is_empty() {
        t.push_str("None.\n");
    }
    for p in params {
        let pname = p
            .attribute("name")
            .context("a <parameter> has no name attribute")?;
        t.push_str(".TP\n");
        let _ = writeln!(
            t,
            "\\fB{}\\fR ({})",
            escape(pname),
            escape(&parameter_facts(p).join(", "))
        );
        if let Some(s) = child_text(p, "shortdesc") {
            let _ = writeln!(t, "{}", escape(&sentence(&s)));
        }
        if let Some(l) = child_text(p, "longdesc") {
            t.push_str(".IP\n");
            let _ = writeln!(t, "{}", escape(&l));
        }
    }
    Ok(())
}

/// A parameter's type, whether it is required or unique, and its default.
fn parameter_facts(p: roxmltree::Node<'_, '_>) -> Vec<String> {
    let content = p.children().find(|c| c.has_tag_name("content"));
    let kind = content
        .and_then(|c| c.attribute("type"))
        .unwrap_or("string");
    let default = content.and_then(|c| c.attribute("default"));
    let mut facts = vec![kind.to_string()];
    if p.attribute("required") == Some("1") {
        facts.push("required".into());
    }
    if p.attribute("unique") == Some("1") {
        facts.push("unique".into());
    }
    match default {
        Some(d) if !d.is_empty() => facts.push(format!("default: {d}")),
        _ => facts.push("no default".into()),
    }
    facts
}

/// The ACTIONS section: each action with its declared defaults.
fn write_ocf_actions(t: &mut String, ra: roxmltree::Node<'_, '_>) -> anyhow::Result<()> {
    t.push_str(".SH ACTIONS\n");
    let actions: Vec<_> = ra
        .children()
        .filter(|n| n.has_tag_name("actions"))
        .flat_map(|n| n.children().filter(|c| c.has_tag_name("action")))
        .collect();
    if actions.is_empty() {
        t.push_str("None declared.\n");
    }
    for a in actions {
        let aname = a
            .attribute("name")
            .context("an <action> has no name attribute")?;
        let facts: Vec<String> = ["timeout", "interval", "depth", "role"]
            .iter()
            .filter_map(|k| a.attribute(*k).map(|v| format!("{k} {v}")))
            .collect();
        t.push_str(".TP\n");
        let _ = writeln!(t, "\\fB{}\\fR", escape(aname));
        let _ = writeln!(
            t,
            "{}",
            escape(&if facts.is_empty() {
                "No defaults declared.".to_string()
            } else {
                format!("Default {}.", facts.join(", "))
            })
        );
    }
    Ok(())
}

/// The CONFIGURATION and SEE ALSO sections.
fn write_ocf_tail(t: &mut String) {
    t.push_str(".SH CONFIGURATION\n");
    let _ = writeln!(
        t,
        "{}",
        escape(
            "etcd-warden pcs-config and etcd-warden crm-config print the complete \
             Pacemaker configuration for a cluster: the clone of this agent, fencing, \
             properties and the alert."
        )
    );
    t.push_str(".SH SEE ALSO\n");
    let _ = writeln!(
        t,
        "\\fB{BIN}\\fR(8), \\fB{BIN}\\-pcs\\-config\\fR(8), \\fBcrm_resource\\fR(8), \\fBpcs\\fR(8)"
    );
}

/// The whitespace-normalised text of `node`'s first `tag` child.
fn child_text(node: roxmltree::Node<'_, '_>, tag: &str) -> Option<String> {
    let c = node.children().find(|c| c.has_tag_name(tag))?;
    let text: String = c
        .descendants()
        .filter(|d| d.is_text())
        .filter_map(|d| d.text())
        .collect();
    let norm = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!norm.is_empty()).then_some(norm)
}

/// A one-line description ending in a full stop.
fn sentence(s: &str) -> String {
    if s.ends_with(['.', '!', '?']) {
        s.to_string()
    } else {
        format!("{s}.")
    }
}

/// Escapes text for a roff text line: backslashes, minus signs (so that
/// options and paths copy-paste as ASCII), and a leading control character on
/// any line.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for line in s.split('\n') {
        if !out.is_empty() {
            out.push('\n');
        }
        if line.starts_with(['.', '\'']) {
            out.push_str("\\&");
        }
        for c in line.chars() {
            match c {
                '\\' => out.push_str("\\e"),
                '-' => out.push_str("\\-"),
                c => out.push(c),
            }
        }
    }
    out
}

/// Text for a double-quoted macro argument (no quotes or newlines inside).
fn quoted_arg(s: &str) -> String {
    escape(&s.replace('"', "'").replace('\n', " "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> clap::Command {
        <crate::cli::Cli as clap::CommandFactory>::command()
    }

    const METADATA: &str = r#"<?xml version="1.0"?>
<!DOCTYPE resource-agent SYSTEM "ra-api-1.dtd">
<resource-agent name="etcd" version="0.1.0">
<version>1.0</version>
<longdesc lang="en">Runs etcd.
  Use `etcd-warden pcs-config`.</longdesc>
<shortdesc lang="en">etcd managed by the etcd-warden daemon</shortdesc>
<parameters>
<parameter name="socket" unique="0" required="0">
<longdesc lang="en">.starts with a dot and has a back\slash</longdesc>
<shortdesc lang="en">Path of the socket</shortdesc>
<content type="string" default="/run/etcd-warden/api.sock"/>
</parameter>
<parameter name="daemon_wait" unique="0" required="1">
<longdesc lang="en">Seconds.</longdesc>
<shortdesc lang="en">Wait.</shortdesc>
<content type="integer" default=""/>
</parameter>
</parameters>
<actions>
<action name="start" timeout="300s"/>
<action name="monitor" timeout="30s" interval="10s" depth="0"/>
<action name="meta-data" timeout="5s"/>
</actions>
</resource-agent>
"#;

    #[test]
    fn ocf_page_lists_parameters_defaults_and_actions() {
        let page = render_ocf_man(METADATA, "etcd-warden").unwrap();
        assert_eq!(page.name, "ocf_etcd-warden_etcd");
        let t = &page.text;
        assert!(
            t.starts_with(".TH OCF_ETCD\\-WARDEN_ETCD 7 \"")
                && t.contains("\" \"etcd\\-warden 0.1.0\" \"OCF resource agents\"\n"),
            "{t}"
        );
        assert!(
            t.contains("ocf_etcd\\-warden_etcd \\- etcd managed by the etcd\\-warden daemon\n")
        );
        assert!(t.contains(
            "\\fBsocket\\fR (string, default: /run/etcd\\-warden/api.sock)\nPath of the socket.\n"
        ));
        assert!(t.contains("\\fBdaemon_wait\\fR (integer, required, no default)\nWait.\n"));
        assert!(t.contains("\\fBmonitor\\fR\nDefault timeout 30s, interval 10s, depth 0.\n"));
        assert!(t.contains("\\fBstart\\fR\nDefault timeout 300s.\n"));
        assert!(t.contains("\\fBmeta\\-data\\fR\n"));
        // Whitespace of the XML text is normalised.
        assert!(t.contains("Runs etcd. Use `etcd\\-warden pcs\\-config`.\n"));
        // A leading dot would be read as a roff request; backslashes escaped.
        assert!(t.contains("\\&.starts with a dot and has a back\\eslash"));
    }

    #[test]
    fn ocf_page_refuses_what_is_not_meta_data() {
        let e = render_ocf_man("<resource-agent", "p").unwrap_err();
        assert!(format!("{e:#}").contains("not well-formed XML"), "{e:#}");
        let e = render_ocf_man("<html/>", "p").unwrap_err();
        assert!(
            format!("{e:#}").contains("expected <resource-agent>"),
            "{e:#}"
        );
        let e = render_ocf_man("<resource-agent/>", "p").unwrap_err();
        assert!(format!("{e:#}").contains("no name attribute"), "{e:#}");
        let e = render_ocf_man(METADATA, "a/b").unwrap_err();
        assert!(format!("{e:#}").contains("bad OCF provider"), "{e:#}");
    }

    #[test]
    fn escape_handles_roff_specials() {
        assert_eq!(escape("a-b\\c"), "a\\-b\\ec");
        assert_eq!(escape("x\n'y\n.z"), "x\n\\&'y\n\\&.z");
    }

    #[test]
    fn man_pages_cover_every_visible_subcommand_and_not_generate() {
        let dir = tempfile::tempdir().unwrap();
        let written = write_man_pages(dir.path(), &cli()).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(names.contains(&"etcd-warden.8".to_string()), "{names:?}");
        for sub in built_cli(&cli())
            .get_subcommands()
            .filter(|s| documented(s))
        {
            let want = format!("etcd-warden-{}.8", sub.get_name());
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        assert!(!names.iter().any(|n| n.contains("generate")), "{names:?}");
        assert!(!names.iter().any(|n| n.contains("help")), "{names:?}");
        let status = fs::read_to_string(dir.path().join("etcd-warden-status.8")).unwrap();
        assert!(status.starts_with(".ie"), "not roff: {status}");
        // Title, section, date, source, manual: none may be empty.
        let th = status.lines().find(|l| l.starts_with(".TH")).unwrap();
        let date = page_date();
        assert_eq!(
            th,
            format!(
                ".TH ETCD-WARDEN-STATUS 8 {date} \"etcd-warden {}\" \"System Administration\"",
                env!("CARGO_PKG_VERSION")
            ),
        );
        // The exit codes in their own section, one paragraph per code.
        let exit = status.split(".SH \"EXIT STATUS\"\n").nth(1).unwrap();
        assert!(
            exit.starts_with(".TP\n\\fB0\\fR\nthis node is healthy"),
            "{status}"
        );
        assert!(exit.contains(".TP\n\\fB78\\fR\n"), "{status}");
        assert!(!status.contains("EXTRA"), "{status}");
        // A paragraph after the codes stays one; a `Files:` block is FILES.
        assert!(
            exit.contains(".PP\nThe exit status judges this node only"),
            "{status}"
        );
        assert!(!exit.contains("\\fBThe\\fR"), "{status}");
        let health = fs::read_to_string(dir.path().join("etcd-warden-health.8")).unwrap();
        let exit = health.split(".SH \"EXIT STATUS\"\n").nth(1).unwrap();
        assert!(exit.starts_with(".TP\n\\fB0\\fR\nHEALTHY"), "{health}");
        let files = health.split(".SH \"FILES\"\n").nth(1).unwrap();
        assert!(
            files.starts_with(".TP\n\\fB/etc/etcd\\-warden/config.toml\\fR\nthe configuration"),
            "{health}"
        );
        assert!(
            files.contains("\\fB/run/etcd\\-warden/report.json\\fR\n"),
            "{health}"
        );
        let top = fs::read_to_string(dir.path().join("etcd-warden.8")).unwrap();
        assert!(top.contains("etcd\\-warden\\-status(8)"), "{top}");
        assert!(
            !top.contains("generate"),
            "the hidden command leaked: {top}"
        );
    }

    #[test]
    fn the_packaged_example_configuration_loads() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dist/config.toml");
        let s = crate::config::load(&example)
            .unwrap_or_else(|e| panic!("{} does not load: {e}", example.display()));
        assert_eq!(s.node_name, "node-a");
    }

    #[test]
    fn completions_for_three_shells_name_the_subcommands() {
        let dir = tempfile::tempdir().unwrap();
        let written = write_completions(dir.path(), &cli()).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["etcd-warden.bash", "_etcd-warden", "etcd-warden.fish"]
        );
        for p in &written {
            let text = fs::read_to_string(p).unwrap();
            assert!(text.contains("pcs-config"), "{}", p.display());
        }
    }
}
