//! The background workers of svc, one module per worker (ingest, collector, profiler, sniffer,
//! tarpit, mutator) sharing one runner. Each builds on the `svc` library; the `svc` command chooses
//! which run embedded in the API and which run as their own processes.
//!
//! No worker has landed yet: the `svc api` command embeds none.
