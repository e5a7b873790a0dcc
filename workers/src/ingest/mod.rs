//! The ingest worker: tails `SVC_INGEST_LOG_FILE` and stores its RFC 5424 lines, with the bounties
//! and credentials they yield.

pub mod derive;
mod useragent;
