//! A small element tree built with quick-xml's streaming reader. crm_mon
//! documents are small (kilobytes to a few megabytes), so a tree costs little
//! and lets the typed parser report an element path plus line:column for every
//! error, which serde deserialisation cannot do.

use std::borrow::Cow;

use quick_xml::XmlVersion;
use quick_xml::events::attributes::Attributes;
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

use crate::error::{Location, ParseError, line_column};

/// crm_mon nests at most bundle/replica/resource/node inside a few sections;
/// anything deeper is not a crm_mon document and is refused before recursion
/// (here, in the typed parser, and in `Drop`) can exhaust the stack.
pub(crate) const MAX_DEPTH: usize = 64;

/// One element: its name, its attributes in document order, its child
/// elements, and the byte offset of its start tag (for error positions).
#[derive(Debug)]
pub(crate) struct Element<'i> {
    pub name: &'i str,
    /// Values borrow from the input unless they held entity references.
    pub attrs: Vec<(&'i str, Cow<'i, str>)>,
    pub children: Vec<Element<'i>>,
    pub text: String,
    pub offset: usize,
}

impl<'i> Element<'i> {
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_ref())
    }

    pub fn child(&self, name: &str) -> Option<&Element<'i>> {
        self.children.iter().find(|c| c.name == name)
    }

    pub fn children_named<'a>(
        &'a self,
        name: &'a str,
    ) -> impl Iterator<Item = &'a Element<'i>> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }
}

/// Parse `input` into a tree of elements. Text is kept only as a convenience
/// (crm_mon carries its error messages as text); comments, processing
/// instructions and the declaration are skipped.
pub(crate) fn parse_tree(input: &str) -> Result<Element<'_>, ParseError> {
    let mut reader = Reader::from_str(input);
    reader.config_mut().trim_text(true);
    let mut stack: Vec<Element<'_>> = Vec::new();
    let mut root: Option<Element<'_>> = None;
    let syntax = |offset: u64, message: String, stack: &[Element<'_>]| {
        let offset = usize::try_from(offset).unwrap_or(usize::MAX);
        let (line, column) = line_column(input, offset);
        ParseError::Syntax {
            location: Location {
                path: path_of(stack),
                line,
                column,
            },
            message,
        }
    };
    loop {
        let before = reader.buffer_position();
        let event = match reader.read_event() {
            Ok(e) => e,
            Err(e) => return Err(syntax(reader.error_position(), e.to_string(), &stack)),
        };
        // `before` may point at whitespace that trimming skipped; report the
        // position of the tag itself.
        let mut offset = usize::try_from(before).unwrap_or(usize::MAX);
        if let Some(rest) = input.get(offset..) {
            offset += rest.find('<').unwrap_or(0);
        }
        match event {
            Event::Start(start) | Event::Empty(start) if root.is_some() => {
                let _ = start;
                return Err(syntax(
                    before,
                    "content after the root element".into(),
                    &stack,
                ));
            }
            Event::Start(start) => {
                if stack.len() >= MAX_DEPTH {
                    let (line, column) = line_column(input, offset);
                    return Err(ParseError::TooDeep {
                        limit: MAX_DEPTH,
                        location: Location {
                            path: path_of(&stack),
                            line,
                            column,
                        },
                    });
                }
                let el = element(&start, offset, input, &stack)?;
                stack.push(el);
            }
            Event::Empty(start) => {
                let el = element(&start, offset, input, &stack)?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(el),
                    None => root = Some(el),
                }
            }
            Event::End(_) => {
                // quick-xml checks that end names match start names.
                let Some(el) = stack.pop() else {
                    return Err(syntax(before, "unexpected end tag".into(), &stack));
                };
                match stack.last_mut() {
                    Some(parent) => parent.children.push(el),
                    None => root = Some(el),
                }
            }
            Event::Text(t) => {
                let raw = AsRef::<str>::as_ref(&t).to_owned();
                match stack.last_mut() {
                    Some(el) => el.text.push_str(&raw),
                    None if raw.trim().is_empty() => {}
                    None => {
                        return Err(syntax(
                            before,
                            "text outside the root element".into(),
                            &stack,
                        ));
                    }
                }
            }
            Event::CData(t) => {
                if let Some(el) = stack.last_mut() {
                    el.text.push_str(AsRef::<str>::as_ref(&t));
                } else {
                    return Err(syntax(
                        before,
                        "CDATA outside the root element".into(),
                        &stack,
                    ));
                }
            }
            Event::GeneralRef(r) => {
                if stack.is_empty() {
                    return Err(syntax(
                        before,
                        "entity reference outside the root element".into(),
                        &stack,
                    ));
                }
                let _ = r;
            }
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
            Event::Eof => break,
        }
    }
    if !stack.is_empty() {
        return Err(syntax(
            u64::try_from(input.len()).unwrap_or(u64::MAX),
            format!(
                "document ends inside <{}> (truncated?)",
                stack.last().map_or("", |e| e.name)
            ),
            &stack,
        ));
    }
    root.ok_or(ParseError::Empty)
}

fn element<'i>(
    start: &BytesStart<'_>,
    offset: usize,
    input: &'i str,
    stack: &[Element<'i>],
) -> Result<Element<'i>, ParseError> {
    // The event's content is `name attrs…` right after the `<` at `offset`;
    // slicing the input itself lets names and values borrow from it.
    let content_len = AsRef::<str>::as_ref(start).len();
    let raw = input
        .get(offset + 1..offset + 1 + content_len)
        .filter(|r| *r == AsRef::<str>::as_ref(start));
    let bad = |message: String| {
        let (line, column) = line_column(input, offset);
        ParseError::Syntax {
            location: Location {
                path: path_of(stack),
                line,
                column,
            },
            message,
        }
    };
    let Some(raw) = raw else {
        return Err(bad("cannot locate the tag in the input".into()));
    };
    let name_len = AsRef::<str>::as_ref(&start.name()).len();
    let name = raw.get(..name_len).unwrap_or(raw);
    let mut attrs = Vec::new();
    for attr in Attributes::new(raw, name_len) {
        let attr = attr.map_err(|e| bad(format!("bad attribute in <{name}>: {e}")))?;
        let key = attr.key.0;
        let value = attr
            .normalized_value(XmlVersion::Implicit1_0)
            .map_err(|e| bad(format!("bad value of attribute `{key}` in <{name}>: {e}")))?;
        attrs.push((key, value));
    }
    Ok(Element {
        name,
        attrs,
        children: Vec::new(),
        text: String::new(),
        offset,
    })
}

fn path_of(stack: &[Element<'_>]) -> String {
    if stack.is_empty() {
        return "/".to_owned();
    }
    let mut p = String::new();
    for el in stack {
        p.push('/');
        p.push_str(el.name);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_a_tree() {
        let t = parse_tree("<?xml version=\"1.0\"?>\n<a x=\"1&amp;2\"><b/><c>hi</c></a>").unwrap();
        assert_eq!(t.name, "a");
        assert_eq!(t.attr("x"), Some("1&2"));
        assert_eq!(t.children.len(), 2);
        assert_eq!(t.child("c").unwrap().text, "hi");
    }

    #[test]
    fn rejects_truncated_and_garbage() {
        assert!(matches!(parse_tree(""), Err(ParseError::Empty)));
        assert!(matches!(parse_tree("   \n"), Err(ParseError::Empty)));
        assert!(matches!(
            parse_tree("<a><b>"),
            Err(ParseError::Syntax { .. })
        ));
        assert!(matches!(
            parse_tree("hello"),
            Err(ParseError::Syntax { .. })
        ));
        assert!(matches!(
            parse_tree("<a></b>"),
            Err(ParseError::Syntax { .. })
        ));
        assert!(matches!(
            parse_tree("<a/><b/>"),
            Err(ParseError::Syntax { .. })
        ));
        assert!(matches!(
            parse_tree("<a x=\"1></a>"),
            Err(ParseError::Syntax { .. })
        ));
    }

    #[test]
    fn refuses_deep_nesting() {
        let doc = "<a>".repeat(MAX_DEPTH + 1);
        assert!(matches!(parse_tree(&doc), Err(ParseError::TooDeep { .. })));
    }
}
