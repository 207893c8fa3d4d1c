//! The parser's error type: every failure names where in the document it
//! happened, as an element path and a line:column, so an operator can open the
//! saved document and look.

use std::fmt;

/// Where in the document an error was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Element path from the root, e.g. `/pacemaker-result/nodes/node[2]`.
    pub path: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (line {}, column {})",
            self.path, self.line, self.column
        )
    }
}

/// A crm_mon document that could not be turned into the typed model.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// The input is not well-formed XML.
    #[error("not well-formed XML at {location}: {message}")]
    Syntax {
        /// Where the syntax error was detected.
        location: Location,
        /// What the XML parser reported.
        message: String,
    },
    /// The input holds no root element at all.
    #[error("empty document: no root element")]
    Empty,
    /// The root element is neither `pacemaker-result` nor `crm_mon`.
    #[error(
        "unexpected root element <{name}> at {location}: expected <pacemaker-result> (crm_mon --output-as=xml) or <crm_mon> (crm_mon --as-xml)"
    )]
    UnexpectedRoot {
        /// The root element's name.
        name: String,
        /// Where it starts.
        location: Location,
    },
    /// A required attribute is absent.
    #[error("missing attribute `{attribute}` on {location}")]
    MissingAttribute {
        /// The attribute's name.
        attribute: String,
        /// The element.
        location: Location,
    },
    /// A required child element is absent.
    #[error("missing element <{element}> in {location}")]
    MissingElement {
        /// The child's name.
        element: String,
        /// The parent element.
        location: Location,
    },
    /// An attribute holds a value of the wrong shape.
    #[error(
        "invalid value {value:?} for attribute `{attribute}` on {location}: expected {expected}"
    )]
    InvalidValue {
        /// The attribute's name.
        attribute: String,
        /// The offending value (truncated to 80 characters).
        value: String,
        /// What was expected.
        expected: String,
        /// The element.
        location: Location,
    },
    /// crm_mon reported that it could not reach the cluster.
    #[error("crm_mon is not connected to the cluster: {description}")]
    Disconnected {
        /// crm_mon's description.
        description: String,
    },
}

/// Compute 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_column(input: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(input.len());
    // Snap back to a character boundary so slicing cannot panic.
    let mut end = offset;
    while end > 0 && !input.is_char_boundary(end) {
        end -= 1;
    }
    let before = &input[..end];
    let line = before.bytes().filter(|b| *b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Truncate a value for an error message.
pub(crate) fn truncate(value: &str) -> String {
    const MAX: usize = 80;
    if value.chars().count() <= MAX {
        value.to_owned()
    } else {
        let mut s: String = value.chars().take(MAX).collect();
        s.push('…');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_column_counts_from_one() {
        assert_eq!(line_column("abc", 0), (1, 1));
        assert_eq!(line_column("a\nbc", 3), (2, 2));
        assert_eq!(line_column("é\nx", 1), (1, 1));
        assert_eq!(line_column("ab", 99), (1, 3));
    }
}
