//! The log line as every svc component sees it: the RFC 5424 parser and formatter are
//! `svc_core::logline` (re-exported here, so the decoys share them without linking `svc`), and
//! `append` hands lines to the ingest file, which needs the async runtime and so lives here.

mod append;

pub use append::append;
pub use svc_core::logline::*;
