//! The XML layer under the typed parsers: roxmltree's tree (one flat arena,
//! names and most values borrowed from the input) seen through [`Element`],
//! the few element operations the parsers need, and roxmltree's errors
//! turned into [`ParseError`]s with a line:column, so that a bad document
//! is reported where an operator can look.

use roxmltree::{Document, Node, ParsingOptions};

use crate::error::{Location, ParseError};

/// Parse `input` into a tree. A DTD is refused: crm_mon and the CIB never
/// carry one, and refusing it rules out entity expansion from the input.
pub(crate) fn parse_tree(input: &str) -> Result<Document<'_>, ParseError> {
    let opts = ParsingOptions {
        allow_dtd: false,
        ..ParsingOptions::default()
    };
    Document::parse_with_options(input, opts).map_err(|e| syntax_error(input, &e))
}

fn syntax_error(input: &str, e: &roxmltree::Error) -> ParseError {
    let (line, column, message) = match e {
        roxmltree::Error::NoRootNode => return ParseError::Empty,
        // roxmltree places this one at 1:1; the end of the input is where
        // the document was cut.
        roxmltree::Error::UnclosedRootNode => {
            let (line, column) = crate::error::line_column(input, input.len());
            (
                line,
                column,
                "document ends inside the root element (truncated?)".to_owned(),
            )
        }
        e => {
            let pos = e.pos();
            // The position is in the location already.
            let message = e.to_string().replace(&format!(" at {pos}"), "");
            (pos.row as usize, pos.col as usize, message)
        }
    };
    ParseError::Syntax {
        location: Location {
            path: "/".to_owned(),
            line,
            column,
        },
        message,
    }
}

/// An element of a parsed document.
#[derive(Clone, Copy)]
pub(crate) struct Element<'a>(Node<'a, 'a>);

impl<'a> Element<'a> {
    /// The root element of `doc`.
    pub(crate) fn root(doc: &'a Document<'a>) -> Self {
        Element(doc.root_element())
    }

    /// The element's local name (crm_mon and the CIB use no namespaces).
    pub(crate) fn name(self) -> &'a str {
        self.0.tag_name().name()
    }

    pub(crate) fn attr(self, name: &str) -> Option<&'a str> {
        self.0.attribute(name)
    }

    /// Child elements, in document order.
    pub(crate) fn children(self) -> impl Iterator<Item = Element<'a>> {
        self.0.children().filter(Node::is_element).map(Element)
    }

    pub(crate) fn child(self, name: &str) -> Option<Element<'a>> {
        self.children().find(|c| c.name() == name)
    }

    pub(crate) fn children_named(self, name: &'a str) -> impl Iterator<Item = Element<'a>> {
        self.children().filter(move |c| c.name() == name)
    }

    /// Its first text, entities decoded ("" when it has none).
    pub(crate) fn text(self) -> &'a str {
        self.0.text().unwrap_or_default()
    }

    /// Byte offset of its start tag in the input, for error positions.
    pub(crate) fn offset(self) -> usize {
        self.0.range().start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_a_tree() {
        let doc =
            parse_tree("<?xml version=\"1.0\"?>\n<a x=\"1&amp;2\"><b/><c>hi</c></a>").unwrap();
        let t = Element::root(&doc);
        assert_eq!(t.name(), "a");
        assert_eq!(t.attr("x"), Some("1&2"));
        assert_eq!(t.children().count(), 2);
        assert_eq!(t.child("c").unwrap().text(), "hi");
        assert_eq!(t.child("c").unwrap().offset(), 41);
    }

    #[test]
    fn rejects_truncated_and_garbage() {
        assert!(matches!(parse_tree(""), Err(ParseError::Empty)));
        assert!(matches!(parse_tree("   \n"), Err(ParseError::Empty)));
        for bad in [
            "<a><b>",
            "hello",
            "<a></b>",
            "<a/><b/>",
            "<a x=\"1></a>",
            "<!DOCTYPE a [<!ENTITY e \"x\">]><a>&e;</a>",
        ] {
            assert!(
                matches!(parse_tree(bad), Err(ParseError::Syntax { .. })),
                "{bad}: {:?}",
                parse_tree(bad).map(|_| ())
            );
        }
        let Err(ParseError::Syntax { location, message }) = parse_tree("<a>\n<b/>\n") else {
            panic!("a truncated document parsed");
        };
        assert_eq!((location.line, location.column), (3, 1));
        assert!(message.contains("truncated"), "{message}");
        let Err(ParseError::Syntax { location, message }) = parse_tree("<a>\n  <b></c>\n</a>")
        else {
            panic!("mismatched tags parsed");
        };
        assert_eq!(location.line, 2, "{message}");
        assert!(!message.contains(" at 2:"), "{message}");
    }
}
