//! How every long-running command stops: SIGTERM (service managers, the supervisor) or SIGINT
//! (Ctrl-C) cancels one token, and the command winds down from there.

use std::io;

use anyhow::Context;
use rustix::process::Signal;
use tokio::process::Command;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// A token cancelled by the first SIGTERM or SIGINT. The handlers are installed before this
/// returns, so call it first: a signal during startup then stops the process cleanly, not abruptly.
pub fn stop_on_signal() -> anyhow::Result<CancellationToken> {
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let stop = CancellationToken::new();
    let on_signal = stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received; stopping"),
            _ = int.recv() => tracing::info!("SIGINT received; stopping"),
        }
        on_signal.cancel();
    });
    Ok(stop)
}

/// Asks the kernel to SIGKILL the child when this process (the supervisor, the updater) dies, so
/// none outlives it even when it is SIGKILLed. The signal follows the spawning *thread*; tokio's
/// worker threads live as long as the runtime, which is the process's whole life.
#[allow(unsafe_code)]
pub fn die_with_parent(command: &mut Command) {
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe calls
    // are allowed. prctl(PR_SET_PDEATHSIG) and getppid are single system calls through rustix: no
    // allocation, no locks, no shared state; the error path builds an io::Error without allocating.
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL)).map_err(io::Error::from)?;
            // The parent may have died between fork and prctl; then no signal will ever come.
            if rustix::process::getppid() != Some(parent) {
                return Err(io::Error::from(io::ErrorKind::Other));
            }
            Ok(())
        });
    }
}
