//! crm-xml: a typed model and parser of Pacemaker's crm_mon XML (both the
//! `pacemaker-result` root of `--output-as=xml` and the legacy `crm_mon` root
//! of `--as-xml`), the `PacemakerCluster` report built from it, and the
//! operator-side health evaluation of such a report. No async runtime: the
//! daemon, the CLI and an operator can all use it.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]
#![warn(missing_docs)]

pub mod cib;
pub mod error;
pub mod health;
pub mod model;
pub mod parse;
pub mod report;
pub mod timefmt;
mod xml;

pub use error::{Location, ParseError};
pub use model::CrmMon;
pub use parse::{parse, parse_bytes};
