//! svc-core: the small, pure part every svc crate shares, the decoys included. A decky links only
//! this, so nothing here may pull in the async runtime, a database driver, the container engine or
//! HTTP; `tests/layering.rs` keeps it so (it depends on no other workspace crate).
//!
//! `logline` is the one RFC 5424 parser and formatter, `text` bounds untrusted text, `time` reads and
//! writes UTC, `ini` is the deployment INI's grammar (what the sections mean is `svc::fleet::plan`'s
//! business) and `catalog` the decoy services and archetypes. `svc` re-exports each where it used to
//! live (`svc::logline`, `svc::text`, `svc::time`, `svc::fleet::ini`, `svc::fleet::catalog`).

pub mod catalog;
pub mod ini;
pub mod logline;
pub mod text;
pub mod time;
