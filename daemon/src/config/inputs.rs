//! Inputs: the fragments of every layer merged in order, not yet checked.
//! A later layer's value replaces an earlier one key by key; a `[[nodes]]`
//! list is replaced as a whole.

use std::path::PathBuf;
use std::sync::Arc;

use super::ConfigError;
use super::fragments::{self, FileCtx, Fragment, Part};

/// One layer's text.
#[derive(Debug, Clone)]
pub(crate) struct Layer {
    /// The file it was read from (or a name for the built-in defaults).
    pub(crate) path: PathBuf,
    /// Its TOML.
    pub(crate) text: String,
    /// Who wrote it.
    pub(crate) kind: LayerKind,
}

/// Who wrote a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LayerKind {
    /// The defaults built into the binary (not a file).
    Builtin,
    /// A file of the shipped (vendor) directory.
    Shipped,
    /// The operator: the main file and the drop-ins of `/etc` and `/run`.
    Operator,
}

/// The merged, unchecked configuration.
#[derive(Debug, Default)]
pub(crate) struct Inputs {
    /// Every key as the last layer that set it says.
    pub(crate) merged: Fragment,
    /// The files read, in order (for errors that name where a key could
    /// have been set).
    pub(crate) files: Vec<PathBuf>,
}

impl Inputs {
    /// Parse and merge `layers`, lowest first.
    pub(crate) fn merge(layers: &[Layer]) -> Result<Inputs, ConfigError> {
        let mut inputs = Inputs::default();
        for layer in layers {
            let file = FileCtx {
                file: Arc::new(layer.path.clone()),
                text: &layer.text,
                defaults: layer.kind != LayerKind::Operator,
            };
            inputs.merged.merge(fragments::parse(&file)?);
            if layer.kind != LayerKind::Builtin {
                inputs.files.push(layer.path.clone());
            }
        }
        Ok(inputs)
    }
}
