//! Per-request profiling (`SVC_PROFILE_REQUESTS`), for developers chasing a slow route: each request
//! is sampled and its flamegraph written as `<epoch_ms>-<METHOD>-<path_slug>.html` into
//! `SVC_PROFILE_DIR`. The sampler is process-wide, so one request is profiled at a time; requests
//! arriving meanwhile are served unprofiled. Off by default, and then this layer is not installed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

/// Samples per second; a prime, so sampling does not beat in step with periodic work.
const SAMPLE_HZ: i32 = 997;

#[derive(Debug)]
pub struct RequestProfiler {
    dir: PathBuf,
    busy: AtomicBool,
}

impl RequestProfiler {
    pub fn new(dir: PathBuf) -> Arc<Self> {
        Arc::new(RequestProfiler { dir, busy: AtomicBool::new(false) })
    }
}

/// Holds the one profiling slot; frees it however the request ends, a dropped future included.
struct Slot<'a>(&'a AtomicBool);

impl<'a> Slot<'a> {
    fn take(busy: &'a AtomicBool) -> Option<Self> {
        (!busy.swap(true, Ordering::AcqRel)).then_some(Slot(busy))
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

pub async fn profile_request(State(profiler): State<Arc<RequestProfiler>>, request: Request, next: Next) -> Response {
    let Some(_slot) = Slot::take(&profiler.busy) else {
        return next.run(request).await;
    };
    let name = file_name(chrono::Utc::now().timestamp_millis(), request.method().as_str(), request.uri().path());
    let sampler = pprof::ProfilerGuardBuilder::default()
        .frequency(SAMPLE_HZ)
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build();
    let response = next.run(request).await;
    match sampler {
        Ok(sampler) => {
            let path = profiler.dir.join(name);
            // Building the graph and writing the file block; keep them off the request threads.
            let written = tokio::task::spawn_blocking(move || write_flamegraph(&sampler, &path).map(|()| path)).await;
            match written {
                Ok(Ok(path)) => tracing::debug!(path = %path.display(), "Request profile written"),
                Ok(Err(err)) => tracing::warn!(error = %format!("{err:#}"), "Cannot write the request profile"),
                Err(err) => tracing::warn!(error = %err, "Request profile task failed"),
            }
        }
        Err(err) => tracing::warn!(error = %err, "Cannot start the request profiler"),
    }
    response
}

fn write_flamegraph(sampler: &pprof::ProfilerGuard<'_>, path: &Path) -> anyhow::Result<()> {
    let report = sampler.report().build()?;
    let mut svg = Vec::new();
    let graph = if report.data.is_empty() {
        "<p>No samples: the request finished between two samples.</p>".to_string()
    } else {
        report.flamegraph(&mut svg)?;
        String::from_utf8(svg)?
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let title = path.file_stem().and_then(|s| s.to_str()).unwrap_or("profile");
    std::fs::write(
        path,
        format!(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head><body>\n{graph}\n</body></html>\n"
        ),
    )?;
    Ok(())
}

/// Longest slug kept, so the name stays within the 255 bytes a file name may have.
const MAX_SLUG: usize = 100;

/// `<epoch_ms>-<METHOD>-<path_slug>.html`, the slug keeping only characters safe in a file name.
fn file_name(epoch_ms: i64, method: &str, path: &str) -> String {
    let slug: String =
        path.chars().take(MAX_SLUG).map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    let slug = slug.trim_matches('_');
    let slug = if slug.is_empty() { "root" } else { slug };
    format!("{epoch_ms}-{method}-{slug}.html")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_request_at_a_time_holds_the_slot_until_it_ends_however_it_ends() {
        let busy = AtomicBool::new(false);
        let slot = Slot::take(&busy).expect("free at first");
        assert!(Slot::take(&busy).is_none());
        drop(slot); // also what happens when a request future is dropped mid-flight
        assert!(Slot::take(&busy).is_some());
    }

    #[test]
    fn file_names_are_safe_and_ordered_by_time() {
        assert_eq!(file_name(1700000000123, "GET", "/api/v1/health"), "1700000000123-GET-api_v1_health.html");
        assert_eq!(file_name(1, "POST", "/"), "1-POST-root.html");
        assert_eq!(file_name(1, "GET", "/../../etc/passwd"), "1-GET-etc_passwd.html");
        assert_eq!(file_name(1, "GET", &"/a".repeat(5000)).len(), "1-GET-.html".len() + 99);
        assert_eq!(file_name(1, "GET", "/ünïcode"), "1-GET-n_code.html");
    }
}
