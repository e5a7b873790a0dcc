//! What svc's integration tests share, a dev-dependency of the crates whose tests need it and never
//! published: [`in_process`] for the tests that run the library in their own process (a fresh
//! database on every backend, the API on a loopback socket, log capture, SSE, a webhook receiver, a
//! database proxy), and [`processes`] for the tests that run `svc`, `nats-server` and podman as
//! processes. Everything here runs the real component; nothing is mocked.

pub mod in_process;
pub mod otlp;
pub mod processes;
