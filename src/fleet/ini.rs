//! The deployment INI's grammar, `svc_core::ini` (the decoys read the same INI), named here beside
//! the `plan` that gives its sections their meaning.

pub use svc_core::ini::*;
