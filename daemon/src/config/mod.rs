//! Configuration: TOML files in layers, merged key by key, then validated
//! into typed [`Settings`].
//!
//! The layers, lowest first (systemd's convention for drop-in directories):
//!
//! 1. the defaults built into the binary, a copy of
//!    `daemon/config/00-defaults.toml` (so the daemon works uninstalled);
//! 2. the shipped drop-ins, `/usr/lib/etcd-warden/config.d/*.toml`
//!    (the same defaults file, installed);
//! 3. the main file, `/etc/etcd-warden/config.toml`;
//! 4. the drop-ins of `/etc/etcd-warden/config.d/` and
//!    `/run/etcd-warden/config.d/`, by file name in lexical order.
//!
//! A drop-in with the same file name as one in an earlier directory
//! replaces it (`/run` over `/etc` over `/usr/lib`); a symlink to
//! `/dev/null` masks it. A later value replaces an earlier one key by key;
//! a `[[nodes]]` list is replaced as a whole.
//!
//! Modules: [`fragments`] (what one file says, with file and line of every
//! value), `inputs` (the merge), `validate` and `etcd_rules` (the checks),
//! [`settings`] (the result) and `host` (the files a configuration names,
//! checked by `etcd-warden check-config`).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) mod changes;
mod etcd_rules;
pub(crate) mod fragments;
pub(crate) mod host;
mod inputs;
pub(crate) mod settings;
mod validate;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_etcd;
#[cfg(test)]
mod tests_layers;

pub use settings::*;
pub(crate) use validate::default_archive_dir;

use fragments::Fragment;
use inputs::{Inputs, Layer, LayerKind};

/// Default location of the main configuration file.
pub(crate) const DEFAULT_CONFIG: &str = "/etc/etcd-warden/config.toml";

/// The shipped defaults, built in: the lowest layer of every configuration.
pub(crate) const BUILTIN_DEFAULTS: &str = include_str!("../../config/00-defaults.toml");

/// The name errors give the built-in defaults.
const BUILTIN_NAME: &str = "(built-in defaults)";

/// The file name of the shipped defaults in the vendor directory.
#[cfg(test)]
pub(crate) const DEFAULTS_FILE_NAME: &str = "00-defaults.toml";

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The file.
    pub(crate) file: Arc<PathBuf>,
    /// 1-based line number.
    pub(crate) line: usize,
}

impl Origin {
    /// A value no file wrote.
    fn unknown() -> Self {
        Origin {
            file: Arc::new(PathBuf::new()),
            line: 0,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// A configuration error. Every variant names the file (and, where there is
/// one, the line and key) so that an operator can fix it without guessing.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    // The OS error is part of the message and deliberately not a `#[source]`:
    // an error chain printed with `{:#}` would otherwise show it twice.
    #[error("cannot read configuration file {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// The file is not valid TOML, or a key has the wrong type or is unknown.
    #[error("{file}:{line}: key `{key}`: {message}")]
    Parse {
        /// The file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// Dotted key path (`etcd.data_dir`, `nodes[1].peer_urls`).
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A value parsed but makes no sense.
    #[error("{origin}: key `{key}`: {message}")]
    Invalid {
        /// Where it was written.
        origin: Origin,
        /// Dotted key path.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A required key is set nowhere.
    #[error("key `{key}` is required but set in none of: {files}")]
    Missing {
        /// Dotted key path.
        key: String,
        /// The files that were read.
        files: String,
    },
}

/// Where the configuration is read from. [`Layout::system`] is the
/// installed one; tests and the standalone mode use [`Layout::beside`], and
/// [`Layout::under`] moves the whole tree under another root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Values from the daemon's command line (standalone mode), which
    /// replace the files' at every load, a reload's too.
    pub(crate) overrides: Overrides,
    /// The shipped drop-in directory, read before the main file.
    pub(crate) vendor_dir: Option<PathBuf>,
    /// The main file (it may be absent when drop-ins say everything).
    pub(crate) main: PathBuf,
    /// Drop-in directories read after the main file; for a file name in
    /// several, the last directory's file is the one read.
    pub(crate) dropin_dirs: Vec<PathBuf>,
}

impl Layout {
    /// `/usr/lib/etcd-warden/config.d` → `/etc/etcd-warden/config.toml` +
    /// `/etc/etcd-warden/config.d` → `/run/etcd-warden/config.d`.
    pub(crate) fn system() -> Self {
        Self::under(Path::new("/"))
    }

    /// The system layout under `root` instead of `/`.
    pub(crate) fn under(root: &Path) -> Self {
        Layout {
            overrides: Overrides::default(),
            vendor_dir: Some(root.join("usr/lib/etcd-warden/config.d")),
            main: root.join("etc/etcd-warden/config.toml"),
            dropin_dirs: vec![
                root.join("etc/etcd-warden/config.d"),
                root.join("run/etcd-warden/config.d"),
            ],
        }
    }

    /// `main` and the `config.d/` directory beside it, nothing else: a
    /// configuration kept in one directory (the standalone mode, tests, a
    /// second instance) is not changed by the host's directories.
    pub(crate) fn beside(main: &Path) -> Self {
        Layout {
            overrides: Overrides::default(),
            vendor_dir: None,
            main: main.to_path_buf(),
            dropin_dirs: vec![main.parent().unwrap_or(Path::new(".")).join("config.d")],
        }
    }

    /// The layout `--config PATH` means: the system layout for the default
    /// path, else [`Layout::beside`] the given file.
    pub(crate) fn for_main(main: &Path) -> Self {
        if main == Path::new(DEFAULT_CONFIG) {
            Self::system()
        } else {
            Self::beside(main)
        }
    }

    /// The files to read in order, each with who wrote it.
    fn files(&self) -> Result<Vec<(PathBuf, LayerKind)>, ConfigError> {
        // File name -> (directory index, path), None when masked; the
        // vendor directory is index 0.
        let mut by_name: BTreeMap<OsString, Option<(usize, PathBuf)>> = BTreeMap::new();
        let dirs = self.vendor_dir.iter().chain(&self.dropin_dirs);
        for (index, dir) in dirs.enumerate() {
            for (name, path) in dropins(dir)? {
                let masked = std::fs::read_link(&path).is_ok_and(|t| t == Path::new("/dev/null"));
                by_name.insert(name, (!masked).then_some((index, path)));
            }
        }
        let vendor = |i: usize| self.vendor_dir.is_some() && i == 0;
        let mut files: Vec<(PathBuf, LayerKind)> = by_name
            .values()
            .flatten()
            .filter(|(i, _)| vendor(*i))
            .map(|(_, p)| (p.clone(), LayerKind::Shipped))
            .collect();
        let operator_start = files.len();
        if self.main.exists() {
            files.push((self.main.clone(), LayerKind::Operator));
        }
        files.extend(
            by_name
                .into_values()
                .flatten()
                .filter(|(i, _)| !vendor(*i))
                .map(|(_, p)| (p, LayerKind::Operator)),
        );
        if files.len() == operator_start {
            return Err(ConfigError::Read {
                path: self.main.clone(),
                error: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
            });
        }
        Ok(files)
    }

    /// Read and merge the configuration, not yet checked.
    fn inputs(&self) -> Result<Inputs, ConfigError> {
        let mut layers = vec![builtin_layer()];
        for (path, kind) in self.files()? {
            let text = std::fs::read_to_string(&path).map_err(|error| ConfigError::Read {
                path: path.clone(),
                error,
            })?;
            layers.push(Layer { path, text, kind });
        }
        Inputs::merge(&layers)
    }

    /// Read, merge and validate the configuration.
    pub(crate) fn load(&self) -> Result<Settings, ConfigError> {
        validate::settings(self.inputs()?, self.clone()).map(|s| self.overrides.apply(s))
    }

    /// [`Layout::load`], then the files the configuration names checked on
    /// this host (see [`host`]).
    pub(crate) fn check(&self) -> Result<Settings, ConfigError> {
        let inputs = self.inputs()?;
        let named = host::Named::of(&inputs.merged);
        let settings = validate::settings(inputs, self.clone())?;
        named.check(&settings)?;
        Ok(settings)
    }
}

/// Settings given on the daemon's command line (`--autostart`,
/// `--http-addr` in standalone mode).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Overrides {
    /// `--autostart`.
    pub(crate) autostart: Option<bool>,
    /// `--http-addr`.
    pub(crate) http_addr: Option<std::net::SocketAddr>,
}

impl Overrides {
    fn apply(&self, mut s: Settings) -> Settings {
        if let Some(a) = self.autostart {
            s.autostart = a;
        }
        if let Some(a) = self.http_addr {
            s.api.http_addr = Some(a);
        }
        s
    }
}

/// `*.toml` in `dir` (none when it does not exist), by name; hidden files
/// (editors' temporary copies) are skipped.
fn dropins(dir: &Path) -> Result<Vec<(OsString, PathBuf)>, ConfigError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => {
            return Err(ConfigError::Read {
                path: dir.to_path_buf(),
                error,
            });
        }
    };
    Ok(entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".toml") && !name.starts_with('.')
        })
        .map(|e| (e.file_name(), e.path()))
        .collect())
}

fn builtin_layer() -> Layer {
    Layer {
        path: PathBuf::from(BUILTIN_NAME),
        text: BUILTIN_DEFAULTS.to_string(),
        kind: LayerKind::Builtin,
    }
}

/// Load and validate the configuration rooted at `main` (`--config`): the
/// system layout for the default path, else `main` and `config.d/` beside
/// it.
pub(crate) fn load(main: &Path) -> Result<Settings, ConfigError> {
    Layout::for_main(main).load()
}

/// What `etcd-warden check-config` checks: [`load`], and the files the
/// configuration names (TLS files, the etcd binary) on this host.
pub(crate) fn check(main: &Path) -> Result<Settings, ConfigError> {
    Layout::for_main(main).check()
}

/// Read the configuration again the way `settings` was read (after an
/// operator edited it, before a restart would pick it up).
pub(crate) fn reload(settings: &Settings) -> Result<Settings, ConfigError> {
    settings.layout.load()
}

/// Validate configuration given as `(file name, text)` pairs, merged in
/// order over the built-in defaults.
pub fn from_texts(texts: &[(PathBuf, String)]) -> Result<Settings, ConfigError> {
    let mut layers = vec![builtin_layer()];
    layers.extend(texts.iter().map(|(path, text)| Layer {
        path: path.clone(),
        text: text.clone(),
        kind: LayerKind::Operator,
    }));
    let layout = Layout::beside(texts.first().map_or(Path::new(DEFAULT_CONFIG), |(p, _)| p));
    validate::settings(Inputs::merge(&layers)?, layout)
}

/// Validate a fragment built in memory over the built-in defaults, as if it
/// had been read from a file.
#[cfg(test)]
pub(crate) fn from_fragment(fragment: Fragment) -> Result<Settings, ConfigError> {
    use fragments::Part;
    let mut inputs = Inputs::merge(&[builtin_layer()])?;
    inputs.merged.merge(fragment);
    validate::settings(inputs, Layout::beside(Path::new("(in memory)")))
}

/// Write a configuration file from a fragment: the same types the loader
/// parses, serialised, under a comment saying who wrote it.
pub(crate) fn render(header: &str, fragment: &Fragment) -> Result<String, toml::ser::Error> {
    let body = fragments::to_toml(fragment)?;
    let comment: String = header.lines().map(|l| format!("# {l}\n")).collect();
    Ok(format!("{comment}\n{body}"))
}

/// Whether an error chain holds a configuration error (exit code 78,
/// `EX_CONFIG`).
pub(crate) fn is_config_error(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<ConfigError>())
}

/// Whether an error chain says that the configuration rooted at `main` is
/// not there at all: its main file is missing and no drop-in says anything.
pub(crate) fn is_absent(e: &anyhow::Error, main: &Path) -> bool {
    e.chain().any(|c| {
        matches!(c.downcast_ref::<ConfigError>(),
            Some(ConfigError::Read { path, error })
                if path == main && error.kind() == std::io::ErrorKind::NotFound)
    })
}

/// The exit code of a configuration error: `EX_CONFIG` from sysexits.h,
/// which the unit lists in `RestartPreventExitStatus=` so that systemd does
/// not restart a daemon that would only fail again.
pub(crate) const EXIT_CONFIG: u8 = 78;
