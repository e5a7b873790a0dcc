//! The unfiltered statistics and histogram every log stream sends, computed at most once a second
//! for all of a process's streams together (both read the whole log table), and the histogram of a
//! filtered stream, computed for it alone.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::db::{Db, DbResult, LogFilter};
use crate::fleet::Fleet;
use crate::http::logs::{DEFAULT_INTERVAL_MINUTES, HistogramPoint};
use crate::http::stats::{self, StatsResponse};

/// Unfiltered statistics and histogram are computed at most this often for all streams together.
const SUMMARY_REUSE: Duration = Duration::from_secs(1);

/// The histogram of the rows `filter` matches, in the log page's default buckets.
pub(super) async fn histogram(db: &Db, filter: &LogFilter) -> DbResult<Vec<HistogramPoint>> {
    let buckets = db.log_histogram(filter, DEFAULT_INTERVAL_MINUTES as u32).await?;
    Ok(buckets.into_iter().map(HistogramPoint::from).collect())
}

/// The unfiltered statistics and histogram every stream sends, computed at most once a second for
/// all of them: both read the whole log table.
#[derive(Debug, Default)]
pub struct Summaries {
    stats: Reused<StatsResponse>,
    histogram: Reused<Vec<HistogramPoint>>,
}

impl Summaries {
    pub(super) async fn stats(&self, db: &Db, fleet: &Fleet) -> DbResult<StatsResponse> {
        self.stats.get(stats::summary(db, fleet)).await
    }

    pub(super) async fn histogram(&self, db: &Db) -> DbResult<Vec<HistogramPoint>> {
        self.histogram.get(histogram(db, &LogFilter::default())).await
    }
}

/// A value reused for [`SUMMARY_REUSE`]; concurrent callers wait for one computation.
#[derive(Debug)]
struct Reused<T> {
    value: tokio::sync::Mutex<Option<(Instant, T)>>,
}

impl<T> Default for Reused<T> {
    fn default() -> Self {
        Reused { value: tokio::sync::Mutex::new(None) }
    }
}

impl<T: Clone> Reused<T> {
    async fn get(&self, compute: impl Future<Output = DbResult<T>>) -> DbResult<T> {
        let mut value = self.value.lock().await;
        if let Some((at, value)) = value.as_ref()
            && at.elapsed() < SUMMARY_REUSE
        {
            return Ok(value.clone());
        }
        let fresh = compute.await?;
        *value = Some((Instant::now(), fresh.clone()));
        Ok(fresh)
    }
}
